/** How a broker serves a client's calls (`serve-client.ts`): its timings and limits, with their defaults. */
import { DEFAULT_MAX_CALL_SECONDS } from '#shared/jobs/model.ts';

/** The settings of serving a client's calls. */
export interface ServeSettings {
  /** The public status route; each attempt's callback URL adds the attempt to its query. */
  readonly callbackUrl: string;
  /** A job's maximum call duration when it sets none, seconds. Default 600. */
  readonly defaultMaxCallSeconds: number;
  /** Wait this long past a call's maximum duration before asking the provider, ms. Default 30,000. */
  readonly reconcileMarginMs: number;
  /** Times reconciliation asks again about a call still not final before failing it. Default 3. */
  readonly reconcileTries: number;
  /** Extra spacing between starts against jitter (see TokenBucket), ms. Default 50. */
  readonly rateMarginMs: number;
  /** Outstanding tasks fetched per query. Default 50. */
  readonly batchSize: number;
  /** Keep the lease while the next task is ready within this long, ms. Default 60,000. */
  readonly holdMs: number;
  /** With nothing startable but calls in flight, look again after this long, ms. Default 5,000. */
  readonly recheckMs: number;
  /** First retry delay of an ambiguous `initiate`, ms (doubles, up to 8 s). Default 250. */
  readonly initiateRetryMs: number;
  /** Tries of one `initiate` before leaving the call to reconciliation. Default 6. */
  readonly initiateTries: number;
  /** How long a cached job is trusted (its status is checked again at every start anyway), ms. Default 5,000. */
  readonly jobCacheMs: number;
  /**
   * How long the client's settings are trusted while serving, ms. Default 5,000: new calling
   * hours, limits or a pause of the client take effect within this long.
   */
  readonly clientCheckMs: number;
}

export const DEFAULT_SERVE_SETTINGS: Omit<ServeSettings, 'callbackUrl'> = {
  defaultMaxCallSeconds: DEFAULT_MAX_CALL_SECONDS,
  reconcileMarginMs: 30_000,
  reconcileTries: 3,
  rateMarginMs: 50,
  batchSize: 50,
  holdMs: 60_000,
  recheckMs: 5_000,
  initiateRetryMs: 250,
  initiateTries: 6,
  jobCacheMs: 5_000,
  clientCheckMs: 5_000,
};
