/**
 * The clients the user belongs to; an administrator sees every client (a page at a time) and may
 * open (or create) any client by id.
 */
import type { App, Page } from '../app.ts';
import { field, h, replace } from '../dom.ts';
import type { ClientSettings } from '../types.ts';

const clientLink = (id: string, note?: string) =>
  h('li', {}, h('a', { href: `#/clients/${encodeURIComponent(id)}` }, id), note ? ` ${note}` : null);

export function clientsPage(app: App): Page {
  const body = h('section', { class: 'card' }, h('p', {}, 'Loading…'));
  void app.me().then(
    (me) => {
      if (me.admin) {
        replace(body, h('h1', {}, 'Clients'), allClients(app), openClientForm(app));
        return;
      }
      const list = me.clients.length
        ? h('ul', { class: 'client-list' }, ...me.clients.map((id) => clientLink(id)))
        : h('p', {}, 'You do not belong to any client yet. Ask an administrator to add you to one.');
      replace(body, h('h1', {}, 'Clients'), list);
    },
    (error: Error) => replace(body, h('p', { class: 'form-errors', role: 'alert' }, error.message)),
  );
  return { title: 'Clients', element: h('main', {}, body) };
}

/** Every client, 50 a page, for an administrator. */
function allClients(app: App): HTMLElement {
  const list = h('ul', { class: 'client-list' });
  const more = h('button', { type: 'button', hidden: true }, 'More clients');
  const state = h('p', { role: 'status' }, 'Loading…');
  let next: string | undefined;
  const load = async () => {
    try {
      const page = await app.api.json<{ clients: ClientSettings[]; next?: string }>(
        'GET',
        `/clients?limit=50${next ? `&next=${encodeURIComponent(next)}` : ''}`,
      );
      list.append(...page.clients.map((c) => clientLink(c.clientId, c.paused ? '(paused)' : undefined)));
      next = page.next;
      more.hidden = !next;
      state.textContent = list.children.length === 0 ? 'No clients yet: create one below.' : '';
    } catch (error) {
      state.textContent = (error as Error).message;
    }
  };
  more.addEventListener('click', () => void load());
  void load();
  return h('div', {}, list, state, more);
}

function openClientForm(app: App): HTMLFormElement {
  const id = h('input', { required: true, pattern: '[A-Za-z0-9_-]{1,64}', placeholder: 'e.g. acme-jp' });
  const form = h(
    'form',
    { class: 'inline-form', 'aria-label': 'Open or create a client' },
    field('Open or create a client (administrators)', 'clientId', id, '1-64 letters, digits, _ or -'),
    h('button', { type: 'submit' }, 'Open'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    app.go(`#/clients/${encodeURIComponent(id.value.trim())}`);
  });
  return form;
}
