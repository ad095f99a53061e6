/**
 * A client's LINE channels: the list on the client's page (with a form to add one), and a
 * channel's page (how it answers, its keyword rules, and forms to rotate the secret or replace the
 * access token). Secrets are only ever typed in, never shown: the API answers that one is set,
 * and until when a rotated-out secret is still accepted.
 */
import { ApiError } from '../api.ts';
import type { App, Page } from '../app.ts';
import { field, formatTime, h, replace, showFieldErrors } from '../dom.ts';
import { shownFor } from '../roles.ts';
import type { ChannelView } from '../types.ts';
import { crumbs } from './parts.ts';

const channelsPath = (clientId: string) => `/clients/${encodeURIComponent(clientId)}/channels`;
const channelHash = (clientId: string, channelId: string) =>
  `#/clients/${encodeURIComponent(clientId)}/channels/${encodeURIComponent(channelId)}`;

function secretInput(name: string): HTMLInputElement {
  return h('input', { type: 'password', name, autocomplete: 'off', spellcheck: 'false' });
}

/** Sends `body`, shows the API's field errors in `form`, and calls `done` with the answer. */
function submitter(
  form: HTMLFormElement,
  send: (body: Record<string, unknown>) => Promise<ChannelView>,
  read: () => Record<string, unknown>,
  done: (channel: ChannelView) => void,
): void {
  const status = form.querySelector<HTMLElement>('.form-status')!;
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    status.textContent = 'Saving…';
    showFieldErrors(form, {});
    try {
      const channel = await send(read());
      status.textContent = 'Saved.';
      for (const input of form.querySelectorAll<HTMLInputElement>('input[type=password]')) input.value = '';
      done(channel);
    } catch (error) {
      status.textContent = '';
      const fieldErrors = error instanceof ApiError ? error.fieldErrors : {};
      showFieldErrors(form, fieldErrors);
      // A refusal of the whole request (another client's channel, a change meanwhile) says so.
      if (Object.keys(fieldErrors).length === 0)
        form.querySelector('.form-errors')!.textContent = (error as Error).message;
    }
  });
}

/** The client page's section: the channels, and a form to add one. */
export function channelsSection(app: App, clientId: string): HTMLElement {
  const list = h('ul', { class: 'channels' }, h('li', {}, 'Loading…'));
  const channelId = h('input', { type: 'text', name: 'channelId', required: true });
  const form = h(
    'form',
    { class: 'channel-add', novalidate: true },
    h('h3', {}, 'Add a channel'),
    field('Channel ID', 'channelId', channelId, 'The channel ID of the LINE Developers console'),
    field('Channel secret', 'channelSecret', secretInput('channelSecret')),
    field('Channel access token', 'accessToken', secretInput('accessToken')),
    h('p', { class: 'form-errors', role: 'alert' }),
    h('button', { type: 'submit', class: 'primary' }, 'Add channel'),
    h('p', { class: 'form-status', role: 'status' }),
  );
  const load = () =>
    app.api.json<{ channels: ChannelView[] }>('GET', channelsPath(clientId)).then(
      ({ channels }) =>
        replace(
          list,
          ...(channels.length === 0
            ? [h('li', {}, 'No channels yet.')]
            : channels.map((c) =>
                h(
                  'li',
                  {},
                  h('a', { href: channelHash(clientId, c.channelId) }, c.channelId),
                  ` (${c.autoAnswer})`,
                ),
              )),
        ),
      (error: unknown) => replace(list, h('li', { role: 'alert' }, (error as Error).message)),
    );
  submitter(
    form,
    (body) => {
      const id = String(body.channelId ?? '').trim();
      if (!id) throw new ApiError(400, 'missing channel ID', { channelId: ['required'] });
      const { channelId: _, ...rest } = body;
      return app.api.json<ChannelView>('PUT', `${channelsPath(clientId)}/${encodeURIComponent(id)}`, rest);
    },
    () => ({
      channelId: channelId.value,
      channelSecret: form.querySelector<HTMLInputElement>('[name=channelSecret]')!.value,
      accessToken: form.querySelector<HTMLInputElement>('[name=accessToken]')!.value,
    }),
    (channel) => app.go(channelHash(clientId, channel.channelId)),
  );
  void load();
  // Channels are an admin's to add or change.
  shownFor(app, clientId, 'admin', form);
  return h('section', { class: 'card', 'aria-label': 'Channels' }, h('h2', {}, 'LINE channels'), list, form);
}

/** What the channel is: how it answers, and whether a rotation is under way. */
function channelFacts(channel: ChannelView): HTMLElement {
  const facts: [string, string][] = [
    [
      'Automatic answers',
      channel.autoAnswer === 'reply'
        ? 'reply (free, at most once)'
        : 'push (exactly once, counts against the quota)',
    ],
    ['Greeting', channel.greeting ?? '—'],
    ['Fallback', channel.fallback ?? '— (no answer when no rule matches)'],
    [
      'Channel secret',
      channel.secret.previousAcceptedUntil
        ? `set; the previous one is accepted until ${formatTime(channel.secret.previousAcceptedUntil)}`
        : 'set',
    ],
    ['Access token', 'set'],
    ['Updated', formatTime(channel.updatedAt)],
  ];
  return h(
    'dl',
    { class: 'facts' },
    ...facts.flatMap(([k, v]) => [h('dt', {}, k), h('dd', { 'data-fact': k.toLowerCase() }, v)]),
  );
}

function rulesTable(channel: ChannelView): HTMLElement {
  if (channel.rules.length === 0) return h('p', {}, 'No keyword rules.');
  return h(
    'table',
    { class: 'rules' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Match'), h('th', {}, 'Pattern'), h('th', {}, 'Answer'))),
    h(
      'tbody',
      {},
      ...channel.rules.map((r) =>
        h(
          'tr',
          {},
          h('td', {}, r.match + (r.ignoreCase ? ' (any case)' : '')),
          h('td', {}, r.pattern),
          h('td', {}, r.answer),
        ),
      ),
    ),
  );
}

/** One channel: its settings, and the forms that change its secret or token. */
export function channelPage(app: App, clientId: string, channelId: string): Page {
  const path = `${channelsPath(clientId)}/${encodeURIComponent(channelId)}`;
  const facts = h('div', {}, h('p', {}, 'Loading…'));
  const show = (channel: ChannelView) =>
    replace(facts, channelFacts(channel), h('h2', {}, 'Keyword rules'), rulesTable(channel));
  const changes = [
    h('section', { class: 'card', 'aria-label': 'Rotate the secret' }, rotateSecretForm(app, path, show)),
    h('section', { class: 'card', 'aria-label': 'Replace the token' }, replaceTokenForm(app, path, show)),
  ];
  app.api
    .json<ChannelView>('GET', path)
    .then(show, (error: unknown) =>
      replace(facts, h('p', { class: 'form-errors', role: 'alert' }, (error as Error).message)),
    );
  shownFor(app, clientId, 'admin', ...changes);
  const element = h(
    'main',
    {},
    crumbs(clientId, `Channel ${channelId}`),
    h('h1', {}, `Channel ${channelId}`),
    h('section', { class: 'card', 'aria-label': 'Channel' }, facts),
    ...changes,
  );
  return { title: `Channel ${channelId}`, element };
}

/** Rotates the channel secret, the previous one still accepted for a grace period; `show` the answer. */
function rotateSecretForm(app: App, path: string, show: (channel: ChannelView) => void): HTMLFormElement {
  const grace = h('input', { type: 'number', name: 'graceHours', min: 0, max: 168, value: 24 });
  const rotate = h(
    'form',
    { novalidate: true },
    h('h2', {}, 'Rotate the channel secret'),
    h(
      'p',
      { class: 'hint' },
      'Issue a new secret in the LINE Developers console, then enter it here. Webhooks signed with the previous secret are accepted for the grace period, so none is refused while LINE switches over.',
    ),
    field('New channel secret', 'channelSecret', secretInput('channelSecret')),
    field('Grace period (hours)', 'graceHours', grace),
    h('p', { class: 'form-errors', role: 'alert' }),
    h('button', { type: 'submit' }, 'Rotate secret'),
    h('p', { class: 'form-status', role: 'status' }),
  );
  submitter(
    rotate,
    (body) => app.api.json<ChannelView>('POST', `${path}/rotate-secret`, body),
    () => ({
      channelSecret: rotate.querySelector<HTMLInputElement>('[name=channelSecret]')!.value,
      graceHours: Number(grace.value),
    }),
    show,
  );
  return rotate;
}

/** Replaces the channel's access token, keeping the rest of the channel; `show` the answer. */
function replaceTokenForm(app: App, path: string, show: (channel: ChannelView) => void): HTMLFormElement {
  const token = h(
    'form',
    { novalidate: true },
    h('h2', {}, 'Replace the access token'),
    field('New channel access token', 'accessToken', secretInput('accessToken')),
    h('p', { class: 'form-errors', role: 'alert' }),
    h('button', { type: 'submit' }, 'Replace token'),
    h('p', { class: 'form-status', role: 'status' }),
  );
  submitter(
    token,
    async (body) => {
      // The channel as it is, with the new token: a replace keeps the secret when it is left out.
      const {
        channelId: _,
        clientId: __,
        secret: ___,
        accessToken: ____,
        updatedAt: _____,
        ...settings
      } = await app.api.json<ChannelView>('GET', path);
      return app.api.json<ChannelView>('PUT', path, { ...settings, ...body });
    },
    () => ({ accessToken: token.querySelector<HTMLInputElement>('[name=accessToken]')!.value }),
    show,
  );
  return token;
}
