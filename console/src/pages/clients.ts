/** The clients the user belongs to; an administrator may open (or create) any client by id. */
import type { App, Page } from '../app.ts';
import { field, h, replace } from '../dom.ts';

export function clientsPage(app: App): Page {
  const body = h('section', { class: 'card' }, h('p', {}, 'Loading…'));
  void app.me().then(
    (me) => {
      const list = me.clients.length
        ? h(
            'ul',
            { class: 'client-list' },
            ...me.clients.map((id) =>
              h('li', {}, h('a', { href: `#/clients/${encodeURIComponent(id)}` }, id)),
            ),
          )
        : h('p', {}, 'You do not belong to any client yet. Ask an administrator to add you to one.');
      const open = me.admin ? openClientForm(app) : null;
      replace(body, h('h1', {}, 'Clients'), list, open);
    },
    (error: Error) => replace(body, h('p', { class: 'form-errors', role: 'alert' }, error.message)),
  );
  return { title: 'Clients', element: h('main', {}, body) };
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
