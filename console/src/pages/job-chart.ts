/**
 * The job page's chart, drawn from the job's series kept by the brokers (`GET …/jobs/{jobId}/series`):
 * the last hour on load, then only the windows after the last one shown, so a reload keeps the
 * history and a refresh reads one small page. A call job: calls in flight (the window's peak)
 * against the limit, starts per second against the line's rate; a message job: messages per second
 * and LINE's 429s per second.
 */
import type uPlot from 'uplot';
import type { App } from '../app.ts';
import type { JobSeriesPage, JobSeriesPoint } from '../types.ts';

/** Windows kept on the chart: two hours at 10 s. */
const MAX_POINTS = 720;
/** Pages read on load at most (360 windows each): an hour at 10 s takes one. */
const MAX_LOAD_PAGES = 4;

export class SeriesChart {
  readonly #box: HTMLElement;
  readonly #app: App;
  readonly #path: string;
  #plot: uPlot | undefined;
  #channel: 'call' | 'message' | undefined;
  readonly #data: number[][] = [[], [], [], [], []];
  /** The `at` of the last window shown: the next read asks for windows after it. */
  #last: string | undefined;
  #loading: Promise<void> | undefined;
  #refreshing: Promise<void> | undefined;

  constructor(app: App, box: HTMLElement, jobPath: string) {
    this.#app = app;
    this.#box = box;
    this.#path = `${jobPath}/series`;
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
      this.#channel ??= answer.channel;
      for (const point of answer.samples) this.#add(point);
      if (answer.samples.length > 0) this.#last = answer.samples.at(-1)!.at;
      if (!answer.next) break;
    }
    this.#draw();
  }

  destroy(): void {
    this.#plot?.destroy();
  }

  #add(point: JobSeriesPoint): void {
    const calls = this.#channel === 'call';
    const t = Date.parse(point.at) / 1000 + point.seconds;
    const row = calls
      ? [
          t,
          point.callsInFlight,
          point.maxConcurrentCalls ?? Number.NaN,
          point.starts / point.seconds,
          point.callsPerSecond ?? Number.NaN,
        ]
      : [t, point.messagesSent / point.seconds, point.rateLimited / point.seconds, Number.NaN, Number.NaN];
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

  #draw(): void {
    if (this.#plot) {
      this.#plot.setData(this.#data as uPlot.AlignedData);
      this.#narrowSingleWindow(this.#plot);
      return;
    }
    // Loaded with the first answer; the counters above work without it.
    this.#loading ??= import('uplot').then(
      ({ default: UPlot }) => {
        this.#plot = this.#create(UPlot);
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

  #create(UPlot: typeof uPlot): uPlot {
    const X_SCALE: uPlot.Scale = { time: true };
    const calls = this.#channel === 'call';
    const options: uPlot.Options = calls
      ? {
          width: Math.max(this.#box.clientWidth, 320),
          height: 260,
          scales: { x: X_SCALE },
          axes: [
            {},
            { label: 'in flight' },
            { side: 1, scale: 'rate', label: 'starts/s', grid: { show: false } },
          ],
          series: [
            {},
            { label: 'calls in flight', stroke: '#2563eb', width: 2 },
            { label: 'limit', stroke: '#2563eb', dash: [6, 4] },
            { label: 'starts/s', stroke: '#16a34a', width: 2, scale: 'rate' },
            { label: 'line rate', stroke: '#16a34a', dash: [6, 4], scale: 'rate' },
          ],
        }
      : {
          width: Math.max(this.#box.clientWidth, 320),
          height: 260,
          scales: { x: X_SCALE },
          axes: [
            {},
            { label: 'messages/s' },
            { side: 1, scale: '429', label: '429s/s', grid: { show: false } },
          ],
          series: [
            {},
            { label: 'messages/s', stroke: '#16a34a', width: 2 },
            { label: '429s/s', stroke: '#dc2626', width: 2, scale: '429' },
            { show: false },
            { show: false },
          ],
        };
    return new UPlot(options, this.#data as uPlot.AlignedData, this.#box);
  }
}
