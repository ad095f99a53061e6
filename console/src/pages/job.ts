/**
 * A job as it runs: counters, a chart over time (calls in flight against the contract's limit and
 * starts per second against the line's rate; for a message job, messages and 429s per second), the
 * outcome breakdown (and a call job's attempts by result, with its answer rate), pause / resume / cancel with confirmation, and the report. Each refresh reads
 * the job (its counts, and the client's calls in flight for a running call job) and the windows of
 * its series after the last one shown (`job-chart.ts`): never its tasks.
 */
import { ApiError } from '../api.ts';
import type { App, Page } from '../app.ts';
import { formatNumber, formatTime, h, replace } from '../dom.ts';
import { poll } from '../poll.ts';
import { mayDo } from '../roles.ts';
import { doneOf, FINAL_STATUSES, type JobView, jobChannels } from '../types.ts';
import { SeriesChart } from './job-chart.ts';
import { countList, crumbs, scrollable } from './parts.ts';

const REFRESH_MS = 2_000;

export function jobPage(app: App, clientId: string, jobId: string): Page {
  const path = `/clients/${encodeURIComponent(clientId)}/jobs/${encodeURIComponent(jobId)}`;
  const heading = h('h1', {}, `Job ${jobId}`);
  const summary = h('section', { class: 'card', 'aria-label': 'Progress' });
  const state = h('p', { class: 'poll-state', role: 'status' });
  const { chart, section: chartSection } = overTime(app, path);
  let current: JobView | undefined;
  /** The read before `current`: a running job neither of whose reads moved has stalled. */
  let previous: JobView | undefined;
  const show = (job: JobView) => {
    previous = current;
    current = job;
    heading.textContent = job.name || `Job ${jobId}`;
    actions.show(job);
    replace(summary, ...summaryOf(job));
  };
  const actions = new JobActions(app, path, jobId, (job) => {
    show(job);
    poller.now();
  });
  void mayDo(app, clientId, 'operator').then((may) => actions.allowOperations(may, current));
  const poller = poll<JobView>({
    intervalMs: REFRESH_MS,
    read: () => readWithChart(app, stalled(current, previous) ? `${path}?why=next-task` : path, chart),
    onData: (job) => {
      show(job);
      return hasSettled(job) ? true : undefined;
    },
    onState: (polled) => {
      // A job that cannot be read (forbidden, gone) offers nothing to do and no chart.
      if (!polled.retrying && polled.message && !current) {
        actions.element.hidden = true;
        chartSection.hidden = true;
      }
      showPollState(state, polled);
    },
  });
  return {
    title: current?.name ?? 'Job',
    element: h(
      'main',
      {},
      crumbs(clientId, jobId),
      heading,
      state,
      summary,
      actions.element,
      actions.answer,
      chartSection,
    ),
    dispose: () => {
      poller.stop();
      chart.destroy();
    },
  };
}

/**
 * Reads the job at `target` and, beside it, the chart's next windows. The chart's read never fails
 * the refresh: the counters come first, the chart catches up.
 */
async function readWithChart(app: App, target: string, chart: SeriesChart): Promise<JobView> {
  const [job] = await Promise.all([
    app.api.json<JobView>('GET', target),
    chart.refresh().catch(() => undefined),
  ]);
  return job;
}

/** The chart of the job's series, with the same figures as a table under it. */
function overTime(app: App, path: string): { chart: SeriesChart; section: HTMLElement } {
  const chartBox = h('div', { class: 'chart' });
  const chartTable = h('div', { class: 'table-scroll' });
  const section = h(
    'section',
    { class: 'card', 'aria-label': 'Over time' },
    h('h2', {}, 'Over time'),
    chartBox,
    h('details', {}, h('summary', {}, 'The chart as a table'), chartTable),
  );
  return { chart: new SeriesChart(app, chartBox, chartTable, path), section };
}

/** The poll's state line: retrying, with when; an alert for a problem that stopped the refresh. */
function showPollState(
  state: HTMLElement,
  {
    retrying,
    message,
    inMs,
  }: { readonly retrying: boolean; readonly message?: string; readonly inMs?: number },
): void {
  state.textContent = retrying
    ? `Cannot reach the API (${message}); retrying in ${Math.round((inMs ?? 0) / 1000)} s…`
    : (message ?? '');
  state.classList.toggle('retrying', retrying);
  state.setAttribute('role', !retrying && message ? 'alert' : 'status');
}

const QUESTIONS = {
  pause: 'Pause this job? Calls in flight finish; nothing new starts.',
  resume: 'Resume this job?',
  cancel: 'Cancel this job? Tasks not started end as cancelled. This cannot be undone.',
} as const;

/**
 * Pause, resume and cancel (with confirmation, for an operator) and the report's download, and
 * the line that gives the API's answer. Nothing is offered before the job is read, nor when it
 * cannot be (another client's, say).
 */
class JobActions {
  readonly element = h('div', { class: 'actions', hidden: true });
  readonly answer = h('p', { class: 'answer', role: 'status' });
  readonly #app: App;
  readonly #path: string;
  readonly #changed: (job: JobView) => void;
  readonly #buttons: Record<keyof typeof QUESTIONS, HTMLButtonElement>;
  #mayOperate = false;

  constructor(app: App, path: string, jobId: string, changed: (job: JobView) => void) {
    this.#app = app;
    this.#path = path;
    this.#changed = changed;
    const button = (action: keyof typeof QUESTIONS, label: string, className?: string) =>
      h('button', { type: 'button', class: className, onclick: () => void this.#act(action) }, label);
    this.#buttons = {
      pause: button('pause', 'Pause'),
      resume: button('resume', 'Resume'),
      cancel: button('cancel', 'Cancel job', 'danger'),
    };
    const download = h(
      'button',
      { type: 'button', onclick: () => void downloadReport(app, path, jobId, this.answer) },
      'Download report',
    );
    this.element.append(this.#buttons.pause, this.#buttons.resume, this.#buttons.cancel, download);
  }

  /** Pause, resume and cancel are an operator's (a viewer downloads the report). */
  allowOperations(may: boolean, job: JobView | undefined): void {
    this.#mayOperate = may;
    if (job) this.show(job);
  }

  show(job: JobView): void {
    const may = this.#mayOperate;
    this.element.hidden = false;
    this.#buttons.pause.hidden = !may || !(job.status === 'scheduled' || job.status === 'running');
    this.#buttons.resume.hidden = !may || job.status !== 'paused';
    this.#buttons.cancel.hidden = !may || FINAL_STATUSES.includes(job.status);
  }

  async #act(action: keyof typeof QUESTIONS): Promise<void> {
    if (!confirm(QUESTIONS[action])) return;
    try {
      const job = await this.#app.api.json<JobView>('POST', `${this.#path}/${action}`);
      this.answer.textContent = `The job is ${job.status}.`;
      this.#changed(job);
      keepFocus(this.element, this.answer);
    } catch (error) {
      this.answer.textContent =
        error instanceof ApiError && error.status === 409
          ? `Not possible: ${error.message}`
          : (error as Error).message;
    }
  }
}

/**
 * Whether a running job has stopped moving (no call in flight, nothing ended between two reads, no
 * reason given): the next read then asks the API why (`?why=next-task`: recipients' hours, a
 * contact limit, a retry delay), which costs it a look at the head of the waiting tasks.
 */
function stalled(current: JobView | undefined, previous: JobView | undefined): boolean {
  if (!current || !previous || current.status !== 'running' || current.waiting?.reason === 'concurrent-limit')
    return false;
  if ((current.live?.callsInFlight ?? 0) > 0) return false;
  return doneOf(current.counts) === doneOf(previous.counts);
}

/**
 * Whether the page may stop refreshing: the job is final and no task is outstanding. A cancel makes
 * the job final at once, while its tasks end over the next seconds (the cancel sweep).
 */
function hasSettled(job: JobView): boolean {
  return FINAL_STATUSES.includes(job.status) && job.counts.outstanding === 0;
}

/**
 * After an action the button pressed may be hidden (Pause gives way to Resume): the focus goes to
 * the first button still shown, else to the answer, never to the page's body.
 */
function keepFocus(actions: HTMLElement, answer: HTMLElement): void {
  if (
    document.activeElement &&
    document.activeElement !== document.body &&
    actions.contains(document.activeElement) &&
    !(document.activeElement as HTMLElement).hidden
  )
    return;
  const next = [...actions.querySelectorAll<HTMLButtonElement>('button')].find((b) => !b.hidden);
  if (next) next.focus();
  else {
    answer.tabIndex = -1;
    answer.focus();
  }
}

function summaryOf(job: JobView): (HTMLElement | null)[] {
  const { counts } = job;
  const done = doneOf(counts);
  const outcomes = [
    ['completed', counts.completed],
    ['failed', counts.failed],
    ['cancelled', counts.cancelled],
    ['expired', counts.expired ?? 0],
    ['outstanding', counts.outstanding],
  ] as const;
  return [
    h(
      'p',
      {},
      h('span', { class: `status status-${job.status}`, 'data-status': job.status }, job.status),
      ` · ${jobChannels(job)} · starts ${formatTime(job.startAt)}`,
      job.endAt ? ` · ends ${formatTime(job.endAt)}` : '',
      job.timeZoneBy === 'recipient' ? " · hours in each recipient's zone" : '',
    ),
    job.waiting ? h('p', { class: 'waiting' }, `Waiting: ${job.waiting.message}`) : null,
    job.failureReason ? h('p', { class: 'form-errors' }, job.failureReason) : null,
    job.status === 'paused' && job.pausedReason
      ? h('p', { class: 'form-errors' }, `Paused: ${job.pausedReason}`)
      : null,
    h('progress', {
      max: Math.max(counts.tasks, 1),
      value: done,
      'aria-label': `${done} of ${counts.tasks} tasks ended`,
    }),
    countList([
      ['Rows', counts.rows],
      ['Tasks', counts.tasks],
      ['Rejected', counts.rejected],
      ['Skipped', counts.skipped],
      ...outcomes.map(([k, n]) => [k[0]!.toUpperCase() + k.slice(1), n] as const),
    ]),
    job.live
      ? h(
          'p',
          {},
          `Calls in flight ${job.live.callsInFlight} of ${job.live.maxConcurrentCalls} · line rate ${job.live.callsPerSecond}/s`,
        )
      : null,
    callResults(job),
    h(
      'div',
      { class: 'breakdown', 'aria-label': 'Outcomes' },
      ...outcomes
        .filter(([, n]) => n > 0)
        .map(([k, n]) =>
          h(
            'span',
            { class: `bar bar-${k}`, style: { flexGrow: String(n) }, title: `${k}: ${n}` },
            `${k} ${formatNumber(n)}`,
          ),
        ),
    ),
  ];
}

/** What a call attempt's result is called on the page, in the order a dialer's report gives them. */
const RESULT_WORDS: readonly (readonly [string, string])[] = [
  ['completed', 'Answered'],
  ['voicemail', 'Voicemail'],
  ['busy', 'Busy'],
  ['no-answer', 'No answer'],
  ['failed', 'Failed'],
];

/**
 * A call job's attempts by result (each attempt once, a retried one too) and its answer rate:
 * answered attempts of those ended. Nothing before an attempt has ended, nor for a message job.
 */
function callResults(job: JobView): HTMLElement | null {
  const results = job.results ?? {};
  const total = Object.values(results).reduce((sum, n) => sum + n, 0);
  if (job.channel !== 'call' || total === 0) return null;
  const known = new Set(RESULT_WORDS.map(([result]) => result));
  const rows: (readonly [string, string, number])[] = [
    ...RESULT_WORDS.map(([result, word]) => [result, word, results[result] ?? 0] as const),
    ...Object.entries(results)
      .filter(([result]) => !known.has(result))
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([result, n]) => [result, result, n] as const),
  ];
  const share = (n: number) => `${((100 * n) / total).toFixed(1)} %`;
  return h(
    'div',
    { class: 'results' },
    h(
      'p',
      { 'data-answer-rate': '' },
      `Answer rate ${share(results.completed ?? 0)}: ${formatNumber(results.completed ?? 0)} of ${formatNumber(total)} call attempts answered`,
    ),
    scrollable(
      { class: 'results', 'aria-label': 'Call attempts by result' },
      h('caption', {}, 'Call attempts by result'),
      h(
        'thead',
        {},
        h('tr', {}, ...['Result', 'Attempts', 'Share'].map((t) => h('th', { scope: 'col' }, t))),
      ),
      h(
        'tbody',
        {},
        ...rows.map(([result, word, n]) =>
          h(
            'tr',
            { 'data-result': result },
            h('td', {}, word),
            h('td', { class: 'number' }, formatNumber(n)),
            h('td', { class: 'number' }, share(n)),
          ),
        ),
      ),
    ),
  );
}

/** Fetches the report with the user's token and saves it (a large one comes from S3 through a redirect). */
async function downloadReport(app: App, path: string, jobId: string, answer: HTMLElement): Promise<void> {
  try {
    answer.textContent = 'Preparing the report…';
    const response = await app.api.fetch('GET', `${path}/report`);
    const blob = await response.blob();
    const link = h('a', { href: URL.createObjectURL(blob), download: `job-${jobId}-report.csv` });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 60_000);
    answer.textContent = 'Report downloaded.';
  } catch (error) {
    answer.textContent = (error as Error).message;
  }
}
