/**
 * A client's opt-outs: look up whether recipients (phone numbers as a list row would write them,
 * or LINE user ids) are opted out now, or page through everyone who is.
 */
import { ApiError } from '../api.ts';
import type { App, Page } from '../app.ts';
import { field, formatTime, h, replace, showFieldErrors } from '../dom.ts';
import type { OptOutView } from '../types.ts';
import { crumbs } from './parts.ts';

function resultRows(optOuts: readonly OptOutView[]): HTMLTableRowElement[] {
  return optOuts.map((o) =>
    h(
      'tr',
      {},
      h('td', {}, o.input && o.input !== o.recipient ? `${o.input} → ${o.recipient}` : o.recipient),
      h('td', { 'data-opted-out': String(o.optedOut) }, o.optedOut ? 'opted out' : 'may be contacted'),
      h('td', {}, formatTime(o.since)),
    ),
  );
}

export function optOutsPage(app: App, clientId: string): Page {
  const path = `/clients/${encodeURIComponent(clientId)}/opt-outs`;
  const recipients = h('textarea', { name: 'recipient', rows: 3 });
  const rows = h('tbody', {});
  const more = h('button', { type: 'button', hidden: true }, 'More');
  const status = h('p', { class: 'form-status', role: 'status' });
  let next: string | undefined;
  const table = h(
    'table',
    { class: 'opt-outs' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Recipient'), h('th', {}, 'State'), h('th', {}, 'Since'))),
    rows,
  );
  const read = async (query: string, append: boolean) => {
    showFieldErrors(form, {});
    status.textContent = 'Looking up…';
    try {
      const answer = await app.api.json<{ optOuts: OptOutView[]; next?: string }>('GET', `${path}?${query}`);
      if (append) rows.append(...resultRows(answer.optOuts));
      else replace(rows, ...resultRows(answer.optOuts));
      next = answer.next;
      more.hidden = !next;
      status.textContent = rows.children.length === 0 ? 'Nobody.' : '';
    } catch (error) {
      status.textContent = '';
      if (error instanceof ApiError && Object.keys(error.fieldErrors).length > 0)
        showFieldErrors(form, error.fieldErrors);
      else form.querySelector('.form-errors')!.textContent = (error as Error).message;
    }
  };
  const form = h(
    'form',
    { novalidate: true },
    field(
      'Recipients',
      'recipient',
      recipients,
      'Phone numbers or LINE user IDs, one a line or separated by commas (up to 100)',
    ),
    h('p', { class: 'form-errors', role: 'alert' }),
    h('button', { type: 'submit', class: 'primary' }, 'Look up'),
    ' ',
    h('button', { type: 'button', onclick: () => read('limit=50', false) }, 'List everyone opted out'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const list = recipients.value
      .split(/[\n,]/)
      .map((r) => r.trim())
      .filter(Boolean);
    void read(`recipient=${encodeURIComponent(list.join(','))}`, false);
  });
  more.addEventListener('click', () => {
    if (next) void read(`limit=50&next=${encodeURIComponent(next)}`, true);
  });
  const element = h(
    'main',
    {},
    crumbs(clientId, 'Opt-outs'),
    h('h1', {}, `Opt-outs of ${clientId}`),
    h('section', { class: 'card', 'aria-label': 'Look up' }, form, status, table, more),
  );
  return { title: `Opt-outs of ${clientId}`, element };
}
