/**
 * The job page's chart, drawn from the job's series kept by the brokers (`GET …/jobs/{jobId}/series`):
 * the last hour on load, then only the windows after the last one shown, so a reload keeps the
 * history and a refresh reads one small page. A call job: calls in flight (the window's peak)
 * against the limit, starts per second against the line's rate; a message job: messages per second
 * and the provider's 429s per second.
 *
 * Read right: both axes start at 0, calls in flight are counted in whole calls, each series has a
 * colour of its own, and the chart has a text alternative (its latest values as its label) and
 * its last windows as a table beside it.
 */
import type uPlot from 'uplot';
import type { App } from '../app.ts';
import { formatNumber, formatTime, h, replace } from '../dom.ts';
import type { JobSeriesPage, JobSeriesPoint } from '../types.ts';

/** Windows kept on the chart: two hours at 10 s. */
const MAX_POINTS = 720;
/** Pages read on load at most (360 windows each): an hour at 10 s takes one. */
const MAX_LOAD_PAGES = 4;
/** Windows the table alternative lists, newest first. */
const TABLE_ROWS = 12;
/** Steps between ticks a count axis may take: whole numbers only. */
const WHOLE_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000];

/** The chart's two y scales, by the side of their axis. */
type Scale = 'left' | 'right';

interface Series {
  readonly label: string;
  readonly stroke: string;
  readonly dash?: number[];
  readonly scale: Scale;
  readonly value: (point: JobSeriesPoint) => number | undefined;
}

/** A kind of chart: its series and its two axes' labels. */
interface ChartKind {
  readonly series: readonly Series[];
  /** The left axis; `whole`: it counts (calls), so its ticks are whole numbers. */
  readonly left: { readonly label: string; readonly whole: boolean };
  readonly right: { readonly label: string };
}

const perSecond = (n: number, point: JobSeriesPoint) => n / point.seconds;

const CALLS: ChartKind = {
  series: [
    { label: 'calls in flight', stroke: '#1d4ed8', scale: 'left', value: (p) => p.callsInFlight },
    { label: 'limit', stroke: '#c2410c', dash: [6, 4], scale: 'left', value: (p) => p.maxConcurrentCalls },
    { label: 'starts/s', stroke: '#15803d', scale: 'right', value: (p) => perSecond(p.starts, p) },
    { label: 'line rate', stroke: '#a21caf', dash: [6, 4], scale: 'right', value: (p) => p.callsPerSecond },
  ],
  left: { label: 'calls in flight', whole: true },
  right: { label: 'starts/s' },
};

const MESSAGES: ChartKind = {
  series: [
    { label: 'messages/s', stroke: '#15803d', scale: 'left', value: (p) => perSecond(p.messagesSent, p) },
    { label: '429s/s', stroke: '#b91c1c', scale: 'right', value: (p) => perSecond(p.rateLimited, p) },
  ],
  left: { label: 'messages/s', whole: false },
  right: { label: '429s/s' },
};

/** A scale from 0 to a little above its highest value (at least 1). */
function fromZero(whole: boolean): uPlot.Scale.Range {
  return (_plot, _min, max) => {
    const top = Math.max(Number.isFinite(max) ? max * 1.1 : 0, 1);
    return [0, whole ? Math.ceil(top) : top];
  };
}

function shown(value: number | null | undefined): string {
  if (value === null || value === undefined || Number.isNaN(value)) return '–';
  return formatNumber(Math.round(value * 100) / 100);
}

export class SeriesChart {
  readonly #box: HTMLElement;
  readonly #table: HTMLElement;
  readonly #app: App;
  readonly #path: string;
  #plot: uPlot | undefined;
  #kind: ChartKind | undefined;
  /** Column 0 the windows' ends (seconds), then one column per series of {@link #kind}. */
  #data: (number | null)[][] = [];
  /** The `at` of the last window shown: the next read asks for windows after it. */
  #last: string | undefined;
  #loading: Promise<void> | undefined;
  #refreshing: Promise<void> | undefined;

  /** `box` holds the chart, `table` its last windows as a table (the text alternative). */
  constructor(app: App, box: HTMLElement, table: HTMLElement, jobPath: string) {
    this.#app = app;
    this.#box = box;
    this.#table = table;
    this.#path = `${jobPath}/series`;
    box.setAttribute('role', 'img');
    box.setAttribute('aria-label', 'Chart over time: no window sampled yet');
  }

  /**
   * Reads the windows after the last one shown (the last hour on the first call) and draws them;
   * one read at a time (a slow answer is not asked again over itself).
   */
  refresh(): Promise<void> {
    this.#refreshing ??= this.#read().finally(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  async #read(): Promise<void> {
    for (let page = 0; page < MAX_LOAD_PAGES; page++) {
      const query = this.#last === undefined ? '' : `?since=${encodeURIComponent(this.#last)}`;
      const answer = await this.#app.api.json<JobSeriesPage>('GET', `${this.#path}${query}`);
      if (!this.#kind) {
        this.#kind = answer.channel === 'call' ? CALLS : MESSAGES;
        this.#data = Array.from({ length: this.#kind.series.length + 1 }, () => []);
      }
      for (const point of answer.samples) this.#add(point);
      if (answer.samples.length > 0) this.#last = answer.samples.at(-1)!.at;
      if (!answer.next) break;
    }
    this.#describe();
    this.#draw();
  }

  destroy(): void {
    this.#plot?.destroy();
  }

  #add(point: JobSeriesPoint): void {
    const t = Date.parse(point.at) / 1000 + point.seconds;
    const row = [t, ...this.#kind!.series.map((s) => s.value(point) ?? null)];
    const x = this.#data[0]!;
    // The same window again (another broker's part of it): the newer answer replaces it.
    const same = x.length > 0 && x[x.length - 1] === t;
    row.forEach((v, i) => {
      const column = this.#data[i]!;
      if (same) column[column.length - 1] = v;
      else column.push(v);
      if (column.length > MAX_POINTS) column.shift();
    });
  }

  /** The text alternative: the latest window in the chart's label, the last windows as a table. */
  #describe(): void {
    const kind = this.#kind;
    const x = this.#data[0] ?? [];
    if (!kind || x.length === 0) return;
    const last = x.length - 1;
    const latest = kind.series.map((s, i) => `${s.label} ${shown(this.#data[i + 1]![last])}`).join(', ');
    this.#box.setAttribute('aria-label', `Chart over time; latest window: ${latest}`);
    const rows: HTMLTableRowElement[] = [];
    for (let i = last; i >= Math.max(0, last - TABLE_ROWS + 1); i--) {
      rows.push(
        h(
          'tr',
          {},
          h('td', {}, formatTime(new Date(x[i]! * 1000).toISOString())),
          ...kind.series.map((_, s) => h('td', {}, shown(this.#data[s + 1]![i]))),
        ),
      );
    }
    replace(
      this.#table,
      h(
        'table',
        { class: 'series-table', 'aria-label': 'The chart’s last windows' },
        h(
          'thead',
          {},
          h('tr', {}, h('th', {}, 'Window ending'), ...kind.series.map((s) => h('th', {}, s.label))),
        ),
        h('tbody', {}, ...rows),
      ),
    );
  }

  #draw(): void {
    if (!this.#kind) return;
    if (this.#plot) {
      this.#plot.setData(this.#data as uPlot.AlignedData);
      this.#narrowSingleWindow(this.#plot);
      return;
    }
    // Loaded with the first answer; the counters above work without it.
    this.#loading ??= import('uplot').then(
      ({ default: UPlot }) => {
        this.#plot = this.#create(UPlot, this.#kind!);
        this.#narrowSingleWindow(this.#plot);
      },
      (error: Error) => {
        this.#box.textContent = `The chart could not load: ${error.message}`;
      },
    );
  }

  /**
   * One window only (a short job): uPlot's time axis around a single point spans 86,400 / 0.001 s,
   * about three years (its day in milliseconds, taken as seconds), and ignores the scale's range
   * function for x; a minute around the point is set instead.
   */
  #narrowSingleWindow(plot: uPlot): void {
    const x = this.#data[0]!;
    if (x.length === 1) plot.setScale('x', { min: x[0]! - 30, max: x[0]! + 30 });
  }

  #create(UPlot: typeof uPlot, kind: ChartKind): uPlot {
    const options: uPlot.Options = {
      width: Math.max(this.#box.clientWidth, 300),
      height: 260,
      // A key of the series only: values under the cursor read "--" everywhere else, and the table
      // below gives each window's values.
      legend: { live: false },
      scales: {
        x: { time: true },
        left: { range: fromZero(kind.left.whole) },
        right: { range: fromZero(false) },
      },
      axes: [
        {},
        {
          scale: 'left',
          label: kind.left.label,
          ...(kind.left.whole ? { incrs: WHOLE_STEPS } : {}),
          // The ticks drawn, on the box too (`data-left-ticks`): the canvas has no text to read.
          values: (_plot: uPlot, splits: number[]) => {
            this.#box.dataset.leftTicks = splits.join(' ');
            return splits.map((v) => formatNumber(v));
          },
        },
        { side: 1, scale: 'right', label: kind.right.label, grid: { show: false } },
      ],
      series: [
        {},
        ...kind.series.map((s) => ({
          label: s.label,
          stroke: s.stroke,
          width: 2,
          scale: s.scale,
          ...(s.dash ? { dash: s.dash } : {}),
        })),
      ],
    };
    return new UPlot(options, this.#data as uPlot.AlignedData, this.#box);
  }
}
