/**
 * A client's opt-outs: look up whether recipients (phone numbers as a list row would write them,
 * or LINE user ids) may be contacted now — neither opted out (a LINE unfollow) nor on the client's
 * suppression (do-not-call) list — or page through everyone opted out.
 */
import { ApiError } from '../api.ts';
import type { App, Page } from '../app.ts';
import { field, formatTime, h, replace, showFieldErrors } from '../dom.ts';
import type { OptOutView, SuppressionView } from '../types.ts';
import { crumbs, scrollable } from './parts.ts';

/** One looked-up recipient: its opt-out and, when the lookup read it, its suppression entry. */
interface Lookup {
  readonly optOut: OptOutView;
  readonly suppression?: SuppressionView;
}

function stateOf({ optOut, suppression }: Lookup): { text: string; since?: string } {
  if (suppression?.suppressed) {
    return {
      text: `on the do-not-call list (${suppression.reason ?? suppression.source ?? 'no reason given'})`,
      ...(suppression.addedAt ? { since: suppression.addedAt } : {}),
    };
  }
  if (optOut.optedOut) return { text: 'opted out', ...(optOut.since ? { since: optOut.since } : {}) };
  return { text: 'may be contacted', ...(optOut.since ? { since: optOut.since } : {}) };
}

function resultRows(lookups: readonly Lookup[]): HTMLTableRowElement[] {
  return lookups.map((lookup) => {
    const o = lookup.optOut;
    const state = stateOf(lookup);
    const blocked = o.optedOut || lookup.suppression?.suppressed === true;
    return h(
      'tr',
      {},
      h('td', {}, o.input && o.input !== o.recipient ? `${o.input} → ${o.recipient}` : o.recipient),
      h('td', { 'data-opted-out': String(blocked) }, state.text),
      h('td', {}, formatTime(state.since)),
    );
  });
}

/** Looks recipients up in the opt-outs and the suppression list at once, matched by recipient. */
async function lookUp(app: App, clientPath: string, query: string): Promise<{ lookups: Lookup[] }> {
  const [optOuts, suppressions] = await Promise.all([
    app.api.json<{ optOuts: OptOutView[] }>('GET', `${clientPath}/opt-outs?${query}`),
    app.api.json<{ suppressions: SuppressionView[] }>('GET', `${clientPath}/suppressions?${query}`),
  ]);
  const byRecipient = new Map(suppressions.suppressions.map((s) => [s.recipient, s]));
  return {
    lookups: optOuts.optOuts.map((optOut) => {
      const suppression = byRecipient.get(optOut.recipient);
      return suppression ? { optOut, suppression } : { optOut };
    }),
  };
}

/** A page of everyone opted out, as lookups with no suppression read. */
async function listOptOuts(
  app: App,
  clientPath: string,
  query: string,
): Promise<{ lookups: Lookup[]; next: string | undefined }> {
  const page = await app.api.json<{ optOuts: OptOutView[]; next?: string }>(
    'GET',
    `${clientPath}/opt-outs?${query}`,
  );
  return { lookups: page.optOuts.map((optOut) => ({ optOut })), next: page.next };
}

/** The look-up's query: the recipients one a line or separated by commas, blanks dropped. */
function recipientQuery(text: string): string {
  const list = text
    .split(/[\n,]/)
    .map((r) => r.trim())
    .filter(Boolean);
  return `recipient=${encodeURIComponent(list.join(','))}`;
}

/** The API's errors at their fields, or the problem under the form when it names none. */
function showProblem(form: HTMLFormElement, error: unknown): void {
  if (error instanceof ApiError && Object.keys(error.fieldErrors).length > 0)
    showFieldErrors(form, error.fieldErrors);
  else form.querySelector('.form-errors')!.textContent = (error as Error).message;
}

export function optOutsPage(app: App, clientId: string): Page {
  const recipients = h('textarea', { name: 'recipient', rows: 3 });
  const rows = h('tbody', {});
  const more = h('button', { type: 'button', hidden: true }, 'More');
  const status = h('p', { class: 'form-status', role: 'status' });
  let next: string | undefined;
  const table = scrollable(
    { class: 'opt-outs' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Recipient'), h('th', {}, 'State'), h('th', {}, 'Since'))),
    rows,
  );
  const clientPath = `/clients/${encodeURIComponent(clientId)}`;
  const read = async (query: string, append: boolean) => {
    showFieldErrors(form, {});
    status.textContent = 'Looking up…';
    try {
      const answer: { lookups: Lookup[]; next?: string | undefined } = query.startsWith('recipient=')
        ? await lookUp(app, clientPath, query)
        : await listOptOuts(app, clientPath, query);
      if (append) rows.append(...resultRows(answer.lookups));
      else replace(rows, ...resultRows(answer.lookups));
      next = answer.next;
      more.hidden = !next;
      status.textContent = rows.children.length === 0 ? 'Nobody.' : '';
    } catch (error) {
      status.textContent = '';
      showProblem(form, error);
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
    void read(recipientQuery(recipients.value), false);
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
