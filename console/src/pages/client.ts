/**
 * One client: its settings (contract, time zone, calling hours per weekday, defaults) in a form
 * whose errors show at their fields, pause / resume, and its jobs, newest first, paged, each with
 * a progress bar.
 */
import { ApiError } from '../api.ts';
import type { App, Page } from '../app.ts';
import { field, formatTime, h, replace, showFieldErrors } from '../dom.ts';
import { type Poller, poll } from '../poll.ts';
import { editableFor, shownFor } from '../roles.ts';
import { type ClientSettings, doneOf, type JobView, type RetryPolicy, WEEKDAYS } from '../types.ts';
import { callingHoursEditor } from './calling-hours-editor.ts';
import { channelsSection } from './channels.ts';
import { scrollable } from './parts.ts';
import { restrictionsEditor } from './restrictions-editor.ts';
import { retriesEditor } from './retries-editor.ts';

/** What the form shows for a client not saved yet (`updatedAt` 0: never saved). */
function newClient(clientId: string): ClientSettings {
  const timeZone = 'Asia/Tokyo';
  const weekly = Object.fromEntries(
    WEEKDAYS.slice(0, 5).map((day) => [day, [{ start: '09:00', end: '18:00' }]]),
  );
  return {
    clientId,
    maxConcurrentCalls: 5,
    callsPerSecond: 1,
    timeZone,
    callingHours: { timeZone, weekly },
    defaultRegion: 'JP',
    updatedAt: 0,
  };
}

export function clientPage(app: App, clientId: string): Page {
  const path = `/clients/${encodeURIComponent(clientId)}`;
  const settings = h('section', { class: 'card', 'aria-label': 'Settings' }, h('p', {}, 'Loading…'));
  const jobs = h('section', { class: 'card', 'aria-label': 'Jobs' });
  let poller: Poller | undefined;
  const element = h(
    'main',
    {},
    h('nav', { class: 'crumbs' }, h('a', { href: '#/' }, 'Clients'), ' / ', clientId),
    h('h1', {}, `Client ${clientId}`),
    settings,
    jobs,
    h('div', { class: 'client-more' }),
  );
  const showJobs = () => {
    poller = jobList(app, path, jobs, clientId);
    replace(
      element.querySelector('.client-more')!,
      channelsSection(app, clientId),
      h(
        'section',
        { class: 'card', 'aria-label': 'Opt-outs' },
        h('h2', {}, 'Opt-outs and do-not-call'),
        h('a', { href: `#/clients/${encodeURIComponent(clientId)}/opt-outs` }, 'Look up opt-outs'),
        ' · ',
        h('a', { href: `#/clients/${encodeURIComponent(clientId)}/suppressions` }, 'Do-not-call list'),
      ),
    );
  };
  app.api.json<ClientSettings>('GET', path).then(
    (client) => {
      replace(settings, settingsForm(app, path, client, false));
      showJobs();
    },
    (error: unknown) => {
      if (error instanceof ApiError && error.status === 404) {
        replace(
          settings,
          h('p', {}, 'This client does not exist yet: save its settings to create it.'),
          settingsForm(app, path, newClient(clientId), true, showJobs),
        );
      } else replace(settings, h('p', { class: 'form-errors', role: 'alert' }, (error as Error).message));
    },
  );
  return { title: `Client ${clientId}`, element, dispose: () => poller?.stop() };
}

/** Pauses or resumes the whole client, after a confirmation; the answer goes to `status`. */
function pauseButton(
  app: App,
  path: string,
  initiallyPaused: boolean,
  status: HTMLElement,
): HTMLButtonElement {
  let paused = initiallyPaused;
  const pause = h(
    'button',
    { type: 'button', 'data-role': 'operator' },
    paused ? 'Resume client' : 'Pause client',
  );
  pause.addEventListener('click', async () => {
    if (
      !confirm(paused ? 'Resume every job of this client?' : 'Pause every call and message of this client?')
    )
      return;
    try {
      const out = await app.api.json<ClientSettings>('POST', `${path}/${paused ? 'resume' : 'pause'}`);
      paused = out.paused === true;
      pause.textContent = paused ? 'Resume client' : 'Pause client';
      status.textContent = paused
        ? 'The client is paused: none of its calls or messages start.'
        : 'The client is running.';
    } catch (error) {
      status.textContent = (error as Error).message;
    }
  });
  return pause;
}

/**
 * Settings the form does not edit (a client's telephony, say): they go back as they came, since a
 * PUT replaces the client and what it leaves out is removed.
 */
function settingsNotEdited(client: ClientSettings): Partial<ClientSettings> {
  const {
    clientId: _,
    updatedAt: __,
    paused: ___,
    messageChannelId: ____,
    jobDefaults: _____,
    allowPartialDelivery: ______,
    ...kept
  } = client as ClientSettings & { updatedAt?: unknown };
  return kept;
}

function settingsForm(
  app: App,
  path: string,
  client: ClientSettings,
  creating: boolean,
  onCreated?: () => void,
): HTMLElement {
  const number = (value: number, min: number, step = '1') =>
    h('input', { type: 'number', min, step, required: true, value: String(value) });
  const maxConcurrent = number(client.maxConcurrentCalls, 1);
  const perSecond = number(client.callsPerSecond, 0.1, 'any');
  const zone = h('select', {});
  const zones = Intl.supportedValuesOf('timeZone');
  if (!zones.includes(client.timeZone)) zones.unshift(client.timeZone);
  for (const z of zones) zone.append(h('option', { value: z, selected: z === client.timeZone }, z));
  const region = h('input', {
    required: true,
    pattern: '[A-Za-z]{2}',
    value: client.defaultRegion,
    maxlength: 2,
  });
  const channel = h('input', { value: client.messageChannelId ?? '' });
  const partial = h('input', { type: 'checkbox', checked: client.allowPartialDelivery === true });
  const hours = callingHoursEditor(client.callingHours.weekly);
  const defaults = jobDefaultsEditor({ ...client.jobDefaults });
  const restrictions = restrictionsEditor(client);
  const status = h('p', { class: 'form-errors', role: 'alert' });
  const readOnly = h('p', { class: 'note', role: 'status' });
  const pause = pauseButton(app, path, client.paused === true, status);
  const form = h(
    'form',
    { 'aria-label': 'Client settings', novalidate: true },
    h('h2', {}, 'Settings'),
    h(
      'div',
      { class: 'grid' },
      field('Most calls in flight (contract)', 'maxConcurrentCalls', maxConcurrent),
      field('Call starts per second (line)', 'callsPerSecond', perSecond),
      field('Time zone', 'timeZone', zone),
      field('Default region', 'defaultRegion', region, 'For numbers written without a country code, e.g. JP'),
      field('LINE channel for message jobs', 'messageChannelId', channel),
      field(
        'Send part of a message job when LINE’s monthly quota cannot cover all of it',
        'allowPartialDelivery',
        partial,
        'Unticked: such a job is paused, saying so, before it sends',
      ),
    ),
    hours.element,
    defaults.element,
    h('div', { class: 'grid' }, ...restrictions.elements),
    status,
    readOnly,
    h(
      'div',
      { class: 'actions' },
      h('button', { type: 'submit', class: 'primary' }, creating ? 'Create client' : 'Save settings'),
      creating ? null : pause,
    ),
  );
  // Settings and contract limits are an admin's; pausing the whole client an operator's.
  editableFor(app, client.clientId, 'admin', form, readOnly);
  shownFor(app, client.clientId, 'operator', pause);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    status.textContent = 'Saving…';
    const jobDefaults = defaults.value();
    const body = {
      ...settingsNotEdited(client),
      maxConcurrentCalls: Number(maxConcurrent.value),
      callsPerSecond: Number(perSecond.value),
      timeZone: zone.value,
      defaultRegion: region.value.trim().toUpperCase(),
      callingHours: hours.value(),
      ...(channel.value.trim() ? { messageChannelId: channel.value.trim() } : {}),
      ...(Object.keys(jobDefaults).length > 0 ? { jobDefaults } : {}),
      ...restrictions.value(),
      ...(partial.checked ? { allowPartialDelivery: true } : {}),
    };
    try {
      await app.api.json('PUT', path, body);
      showFieldErrors(form, {});
      status.textContent = 'Saved.';
      if (creating) {
        creating = false;
        onCreated?.();
      }
    } catch (error) {
      // The errors go to their fields; the summary (this status line) keeps those with no field shown.
      if (error instanceof ApiError) showFieldErrors(form, error.fieldErrors);
      const unplaced = error instanceof ApiError ? status.textContent : '';
      status.textContent = `${(error as Error).message}${unplaced ? `: ${unplaced}` : ''}`;
    }
  });
  return form;
}

/**
 * What a new job of this client gets when its request does not say: channel, scenario, attempts
 * and the delay between them, and retries by outcome (a form per outcome). An empty field is no
 * default; a default this editor does not know is kept as it is.
 */
function jobDefaultsEditor(initial: Record<string, unknown>) {
  const text = (value: unknown) => (value === undefined ? '' : String(value));
  const channel = h(
    'select',
    {},
    h('option', { value: '' }, '(call)'),
    ...['call', 'line', 'email'].map((c) => h('option', { value: c, selected: initial.channel === c }, c)),
  );
  const scenario = h('input', { value: text(initial.scenarioId) });
  const attempts = h('input', { type: 'number', min: 1, max: 10, step: 1, value: text(initial.maxAttempts) });
  const delay = h('input', { type: 'number', min: 0, step: 1, value: text(initial.retryDelaySeconds) });
  const retries = retriesEditor('jobDefaults.retries', initial.retries as RetryPolicy | undefined);
  const element = h(
    'fieldset',
    { class: 'grid', 'data-field': 'jobDefaults' },
    h('legend', {}, 'Job defaults (when a job does not say)'),
    field('Channel', 'jobDefaults.channel', channel),
    field('Scenario', 'jobDefaults.scenarioId', scenario, "The voice bot's scenario id"),
    field('Attempts per task', 'jobDefaults.maxAttempts', attempts, '1 to 10'),
    field('Seconds between attempts', 'jobDefaults.retryDelaySeconds', delay),
    retries.element,
  );
  const value = (): Record<string, unknown> => {
    const out: Record<string, unknown> = { ...initial };
    const set = (key: string, v: unknown) => {
      if (v === '' || v === undefined) delete out[key];
      else out[key] = v;
    };
    set('channel', channel.value);
    set('scenarioId', scenario.value.trim());
    set('maxAttempts', attempts.value === '' ? '' : Number(attempts.value));
    set('retryDelaySeconds', delay.value === '' ? '' : Number(delay.value));
    set('retries', retries.value());
    return out;
  };
  return { element, value };
}

/** The client's jobs, newest first, 20 a page; the first page refreshes every 5 s. */
function jobList(app: App, path: string, section: HTMLElement, clientId: string): Poller {
  const rows = h('tbody', {});
  const more = h('button', { type: 'button', hidden: true }, 'Older jobs');
  let next: string | undefined;
  const older: JobView[] = [];
  let first: JobView[] = [];
  const render = () => replace(rows, ...[...first, ...older].map((job) => jobRow(clientId, job)));
  const state = h('p', { class: 'poll-state', role: 'status' });
  // Beside the button, not in the state line (which each refresh rewrites); the button stays to try again.
  const moreProblem = h('p', { class: 'form-errors', role: 'alert' });
  more.addEventListener('click', async () => {
    if (!next) return;
    more.disabled = true;
    try {
      const page = await app.api.json<{ jobs: JobView[]; next?: string }>(
        'GET',
        `${path}/jobs?limit=20&next=${encodeURIComponent(next)}`,
      );
      older.push(...page.jobs);
      next = page.next;
      more.hidden = !next;
      moreProblem.textContent = '';
      render();
    } catch (error) {
      moreProblem.textContent = `Older jobs could not be read: ${(error as Error).message}`;
    } finally {
      more.disabled = false;
    }
  });
  replace(
    section,
    h('div', { class: 'heading' }, h('h2', {}, 'Jobs'), newJobLink(app, clientId)),
    state,
    scrollable(
      { class: 'jobs' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', {}, 'Job'),
          h('th', {}, 'Channel'),
          h('th', {}, 'Status'),
          h('th', {}, 'Progress'),
          h('th', {}, 'Created'),
        ),
      ),
      rows,
    ),
    more,
    moreProblem,
  );
  return poll({
    intervalMs: 5_000,
    read: () => app.api.json<{ jobs: JobView[]; next?: string }>('GET', `${path}/jobs?limit=20`),
    onData: (page) => {
      first = page.jobs;
      if (older.length === 0) {
        next = page.next;
        more.hidden = !next;
      }
      render();
      if (first.length === 0) replace(rows, h('tr', {}, h('td', { colspan: 5 }, 'No jobs yet.')));
      return undefined;
    },
    onState: ({ retrying, message }) => {
      state.textContent = retrying ? `Cannot reach the API (${message}); retrying…` : (message ?? '');
    },
  });
}

/** "New job", for those whose role may create one. */
function newJobLink(app: App, clientId: string): HTMLElement {
  const link = h(
    'a',
    { class: 'button primary', href: `#/clients/${encodeURIComponent(clientId)}/jobs/new` },
    'New job',
  );
  shownFor(app, clientId, 'operator', link);
  return link;
}

function jobRow(clientId: string, job: JobView): HTMLTableRowElement {
  const done = doneOf(job.counts);
  return h(
    'tr',
    {},
    h(
      'td',
      {},
      h('a', { href: `#/clients/${encodeURIComponent(clientId)}/jobs/${job.jobId}` }, job.name || job.jobId),
    ),
    h('td', {}, job.channel),
    h('td', {}, h('span', { class: `status status-${job.status}` }, job.status)),
    h(
      'td',
      {},
      h('progress', {
        max: Math.max(job.counts.tasks, 1),
        value: done,
        'aria-label': `${done} of ${job.counts.tasks} tasks ended`,
      }),
      ` ${done}/${job.counts.tasks}`,
    ),
    h('td', {}, formatTime(job.createdAt)),
  );
}
