/**
 * One client: its settings (contract, time zone, calling hours per weekday, defaults, email and SMS sending) in a form
 * whose errors show at their fields, pause / resume, and its jobs, newest first, paged, each with
 * a progress bar.
 */
import { ApiError } from '../api.ts';
import type { App, Page } from '../app.ts';
import { field, formatTime, h, replace, showFieldErrors } from '../dom.ts';
import { type Poller, poll } from '../poll.ts';
import { editableFor, shownFor } from '../roles.ts';
import {
  type ClientSettings,
  doneOf,
  type JobView,
  jobChannels,
  type RetryPolicy,
  WEEKDAYS,
} from '../types.ts';
import { callingHoursEditor } from './calling-hours-editor.ts';
import { channelsSection } from './channels.ts';
import { scrollable } from './parts.ts';
import { restrictionsEditor } from './restrictions-editor.ts';
import { retriesEditor } from './retries-editor.ts';
import { sendingEditor } from './sending-editor.ts';

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
    poller = new JobList(app, path, clientId).show(jobs);
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
        ' · ',
        h('a', { href: `#/clients/${encodeURIComponent(clientId)}/people` }, 'People'),
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
    email: _______,
    sms: ________,
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
  const own = ownFields(client);
  const hours = callingHoursEditor(client.callingHours.weekly);
  const defaults = jobDefaultsEditor({ ...client.jobDefaults });
  const restrictions = restrictionsEditor(client);
  const sending = sendingEditor(client);
  const status = h('p', { class: 'form-errors', role: 'alert' });
  const readOnly = h('p', { class: 'note', role: 'status' });
  const pause = pauseButton(app, path, client.paused === true, status);
  const form = h(
    'form',
    { 'aria-label': 'Client settings', novalidate: true },
    h('h2', {}, 'Settings'),
    own.element,
    hours.element,
    defaults.element,
    h('div', { class: 'grid' }, ...restrictions.elements),
    ...sending.elements,
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
  const settings = () => {
    const jobDefaults = defaults.value();
    return {
      ...settingsNotEdited(client),
      ...own.value(),
      callingHours: hours.value(),
      ...(Object.keys(jobDefaults).length > 0 ? { jobDefaults } : {}),
      ...restrictions.value(),
      ...sending.value(),
    };
  };
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const saved = await saveSettings(app, path, form, status, settings);
    if (saved && creating) {
      creating = false;
      onCreated?.();
    }
  });
  return form;
}

/** The fields of the form's own: contract limits, time zone, region, LINE channel, partial sending. */
function ownFields(client: ClientSettings) {
  const number = (value: number, min: number, step = '1') =>
    h('input', { type: 'number', min, step, required: true, value: String(value) });
  const maxConcurrent = number(client.maxConcurrentCalls, 1);
  const perSecond = number(client.callsPerSecond, 0.1, 'any');
  const zone = timeZoneSelect(client.timeZone);
  const region = h('input', {
    required: true,
    pattern: '[A-Za-z]{2}',
    value: client.defaultRegion,
    maxlength: 2,
  });
  const channel = h('input', { value: client.messageChannelId ?? '' });
  const partial = h('input', { type: 'checkbox', checked: client.allowPartialDelivery === true });
  const element = h(
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
  );
  const value = () => ({
    maxConcurrentCalls: Number(maxConcurrent.value),
    callsPerSecond: Number(perSecond.value),
    timeZone: zone.value,
    defaultRegion: region.value.trim().toUpperCase(),
    ...(channel.value.trim() ? { messageChannelId: channel.value.trim() } : {}),
    ...(partial.checked ? { allowPartialDelivery: true } : {}),
  });
  return { element, value };
}

/** Every time zone the browser knows, `current` first among them if it does not know it. */
function timeZoneSelect(current: string): HTMLSelectElement {
  const zone = h('select', {});
  const zones = Intl.supportedValuesOf('timeZone');
  if (!zones.includes(current)) zones.unshift(current);
  for (const z of zones) zone.append(h('option', { value: z, selected: z === current }, z));
  return zone;
}

/**
 * PUTs the client's settings; the API's errors go to their fields, and `status` says how it went.
 * Resolves true once saved.
 */
async function saveSettings(
  app: App,
  path: string,
  form: HTMLFormElement,
  status: HTMLElement,
  settings: () => Record<string, unknown>,
): Promise<boolean> {
  status.textContent = 'Saving…';
  const body = settings();
  try {
    await app.api.json('PUT', path, body);
    showFieldErrors(form, {});
    status.textContent = 'Saved.';
    return true;
  } catch (error) {
    // The errors go to their fields; the summary (this status line) keeps those with no field shown.
    if (error instanceof ApiError) showFieldErrors(form, error.fieldErrors);
    const unplaced = error instanceof ApiError ? status.textContent : '';
    status.textContent = `${(error as Error).message}${unplaced ? `: ${unplaced}` : ''}`;
    return false;
  }
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
    ...['call', 'line', 'email', 'sms'].map((c) =>
      h('option', { value: c, selected: initial.channel === c }, c),
    ),
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

interface JobsPage {
  readonly jobs: JobView[];
  readonly next?: string;
}

/** The client's jobs, newest first, 20 a page; the first page refreshes every 5 s. */
class JobList {
  readonly #app: App;
  readonly #path: string;
  readonly #clientId: string;
  readonly #rows = h('tbody', {});
  readonly #more = h('button', { type: 'button', hidden: true }, 'Older jobs');
  readonly #state = h('p', { class: 'poll-state', role: 'status' });
  // Beside the button, not in the state line (which each refresh rewrites); the button stays to try again.
  readonly #moreProblem = h('p', { class: 'form-errors', role: 'alert' });
  /** The first page, as last read. */
  #first: JobView[] = [];
  /** The pages after the first, as "Older jobs" read them. */
  readonly #older: JobView[] = [];
  #next: string | undefined;

  constructor(app: App, path: string, clientId: string) {
    this.#app = app;
    this.#path = path;
    this.#clientId = clientId;
    this.#more.addEventListener('click', () => void this.#readOlder());
  }

  /** Shows the list in `section` and polls its first page until the poller is stopped. */
  show(section: HTMLElement): Poller {
    replace(
      section,
      h('div', { class: 'heading' }, h('h2', {}, 'Jobs'), newJobLink(this.#app, this.#clientId)),
      this.#state,
      scrollable({ class: 'jobs' }, jobsHead(), this.#rows),
      this.#more,
      this.#moreProblem,
    );
    return poll({
      intervalMs: 5_000,
      read: () => this.#app.api.json<JobsPage>('GET', `${this.#path}/jobs?limit=20`),
      onData: (page) => {
        this.#showFirst(page);
        return undefined;
      },
      onState: ({ retrying, message }) => {
        this.#state.textContent = retrying ? `Cannot reach the API (${message}); retrying…` : (message ?? '');
      },
    });
  }

  #render(): void {
    replace(this.#rows, ...[...this.#first, ...this.#older].map((job) => jobRow(this.#clientId, job)));
  }

  #showFirst(page: JobsPage): void {
    this.#first = page.jobs;
    if (this.#older.length === 0) {
      this.#next = page.next;
      this.#more.hidden = !this.#next;
    }
    this.#render();
    if (this.#first.length === 0) replace(this.#rows, h('tr', {}, h('td', { colspan: 5 }, 'No jobs yet.')));
  }

  async #readOlder(): Promise<void> {
    if (!this.#next) return;
    this.#more.disabled = true;
    try {
      const page = await this.#app.api.json<JobsPage>(
        'GET',
        `${this.#path}/jobs?limit=20&next=${encodeURIComponent(this.#next)}`,
      );
      this.#older.push(...page.jobs);
      this.#next = page.next;
      this.#more.hidden = !this.#next;
      this.#moreProblem.textContent = '';
      this.#render();
    } catch (error) {
      this.#moreProblem.textContent = `Older jobs could not be read: ${(error as Error).message}`;
    } finally {
      this.#more.disabled = false;
    }
  }
}

function jobsHead(): HTMLTableSectionElement {
  return h(
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
  );
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
    h('td', {}, jobChannels(job)),
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
