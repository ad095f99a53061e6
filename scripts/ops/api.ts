/**
 * The operator API as the CLI calls it: every request SigV4-signed for `execute-api`
 * (`local/operator-client.ts`), every answer read into a record or a one-line {@link ApiError}
 * (the API's message and field errors), every failure to connect a {@link NetworkError} naming only
 * the host (a presigned URL's query is a credential: it is never printed).
 */
import { makeSignedFetch } from '#local/operator-client.ts';
import type { CreatedJob, JobAction, JobView } from '#shared/jobs/api.ts';
import type { ClientSettings } from '#shared/jobs/model.ts';
import type { OptOutsAnswer } from '#shared/jobs/opt-outs.ts';
import type {
  SuppressionsAnswer,
  SuppressionUploadAnswer,
  SuppressionView,
} from '#shared/suppressions/api.ts';
import { ApiError, NetworkError, OpsError, oneLine } from './errors.ts';
import { fieldErrorsLine, type RowProblem } from './format.ts';
import type { Target } from './target.ts';

/** How long a JSON call may take (a message job's pause waits up to 3 s for its broker). */
const CALL_TIMEOUT_MS = 30_000;

export interface JobPage {
  readonly jobs: readonly JobView[];
  readonly next?: string;
}

/** A report on its way: its bytes, and where the job stood when it was made. */
export interface ReportDownload {
  readonly body: ReadableStream<Uint8Array>;
  readonly jobStatus?: string;
  readonly waiting?: string;
}

/** A one-line error for a failed call: `POST /clients/acme/jobs: 400 invalid job options — maxAttempts: …`. */
export function apiErrorOf(method: string, path: string, status: number, text: string): ApiError {
  let body: { message?: unknown; fieldErrors?: unknown } | undefined;
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    body = undefined;
  }
  const message =
    typeof body?.message === 'string' ? body.message : oneLine(text).slice(0, 200) || 'no message';
  const fieldErrors =
    typeof body?.fieldErrors === 'object' && body.fieldErrors !== null
      ? (body.fieldErrors as Record<string, string[]>)
      : {};
  const details = fieldErrorsLine(fieldErrors);
  const hint =
    status === 403
      ? " (the API refused the signature or this identity may not call the route: check the credentials, --region, the clock, and execute-api:Invoke on the client's routes)"
      : status >= 500
        ? ' (the API failed: see its logs)'
        : '';
  return new ApiError(
    `${method} ${path}: ${status} ${oneLine(message)}${details ? ` — ${details}` : ''}${hint}`,
    status,
    fieldErrors,
  );
}

/** A failure to connect, naming the host only. */
export function networkErrorOf(error: unknown, url: URL, local: boolean): NetworkError {
  const e = error as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  const where = url.origin;
  if (e.name === 'TimeoutError' || e.name === 'AbortError')
    return new NetworkError(`no answer from ${where} in time`);
  const code = e.cause?.code;
  if (code === 'ECONNREFUSED') {
    return new NetworkError(
      `cannot reach ${where}: connection refused${local ? ' (is npm start still running?)' : ''}`,
    );
  }
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN')
    return new NetworkError(`cannot reach ${where}: no such host`);
  return new NetworkError(
    `cannot reach ${where}: ${oneLine(e.cause?.message ?? e.message ?? 'network error')}`,
  );
}

/** Errors from fetch itself (not from signing: a credentials error must stay what it is). */
function isFetchFailure(error: unknown): boolean {
  const name = (error as Error)?.name;
  return (
    name === 'TimeoutError' ||
    name === 'AbortError' ||
    (error instanceof TypeError && /fetch failed|terminated/i.test(error.message))
  );
}

const seg = encodeURIComponent;

/** The operator API's routes, signed. */
export class OperatorApi {
  readonly #target: Target;
  readonly #fetch: ReturnType<typeof makeSignedFetch>;
  readonly #base: URL;

  constructor(target: Target) {
    this.#target = target;
    this.#fetch = makeSignedFetch({ region: target.region, credentials: target.credentials });
    this.#base = new URL(target.baseUrl);
  }

  #url(path: string, query: Readonly<Record<string, string | undefined>> = {}): URL {
    const url = new URL(this.#base.pathname.replace(/\/$/, '') + path, this.#base);
    for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, v);
    return url;
  }

  async #send(
    method: string,
    url: URL,
    init: {
      body?: string | Uint8Array;
      headers?: Record<string, string>;
      redirect?: 'follow' | 'manual' | 'error';
      /** A download: no time limit (it takes what it takes; undici's idle timeouts still hold). */
      download?: boolean;
    },
  ): Promise<Response> {
    try {
      return await this.#fetch(method, url, {
        ...(init.body === undefined ? {} : { body: init.body }),
        ...(init.headers ? { headers: init.headers } : {}),
        ...(init.redirect ? { redirect: init.redirect } : {}),
        ...(init.download ? {} : { signal: AbortSignal.timeout(CALL_TIMEOUT_MS) }),
      });
    } catch (error) {
      if (isFetchFailure(error)) throw networkErrorOf(error, url, this.#target.local);
      throw error;
    }
  }

  async #call<T>(
    method: string,
    path: string,
    options: { json?: unknown; csv?: Uint8Array; query?: Record<string, string | undefined> } = {},
  ): Promise<T> {
    const url = this.#url(path, options.query);
    const response = await this.#send(method, url, {
      ...(options.json === undefined
        ? {}
        : { body: JSON.stringify(options.json), headers: { 'content-type': 'application/json' } }),
      ...(options.csv === undefined
        ? {}
        : { body: options.csv, headers: { 'content-type': 'application/octet-stream' } }),
    });
    let text: string;
    try {
      text = await response.text();
    } catch (error) {
      throw networkErrorOf(error, url, this.#target.local);
    }
    if (!response.ok) throw apiErrorOf(method, url.pathname + url.search, response.status, text);
    try {
      return (text === '' ? {} : JSON.parse(text)) as T;
    } catch {
      throw new OpsError(`${method} ${url.pathname}: ${response.status} but the answer is not JSON`);
    }
  }

  listClients(page: { readonly limit?: string; readonly next?: string }): Promise<{
    clients: ClientSettings[];
    next?: string;
  }> {
    return this.#call('GET', '/clients', { query: page });
  }

  getClient(clientId: string): Promise<ClientSettings> {
    return this.#call('GET', `/clients/${seg(clientId)}`);
  }

  putClient(clientId: string, settings: unknown): Promise<ClientSettings> {
    return this.#call('PUT', `/clients/${seg(clientId)}`, { json: settings });
  }

  setClientPaused(clientId: string, paused: boolean): Promise<ClientSettings> {
    return this.#call('POST', `/clients/${seg(clientId)}/${paused ? 'pause' : 'resume'}`);
  }

  createJob(clientId: string, options: unknown): Promise<CreatedJob> {
    return this.#call('POST', `/clients/${seg(clientId)}/jobs`, { json: options });
  }

  /** The job, and why it starts nothing when it does not (its first waiting task, when that is why). */
  getJob(clientId: string, jobId: string): Promise<JobView> {
    return this.#call('GET', `/clients/${seg(clientId)}/jobs/${seg(jobId)}`, { query: { why: 'next-task' } });
  }

  listJobs(clientId: string, page: { readonly limit?: string; readonly next?: string }): Promise<JobPage> {
    return this.#call('GET', `/clients/${seg(clientId)}/jobs`, { query: page });
  }

  changeJob(clientId: string, jobId: string, action: JobAction): Promise<JobView> {
    return this.#call('POST', `/clients/${seg(clientId)}/jobs/${seg(jobId)}/${action}`);
  }

  /** The first `limit` (at most 500) rejected and skipped rows of a job's list, and whether there are more. */
  rowProblems(
    clientId: string,
    jobId: string,
    limit: number,
  ): Promise<{ readonly entries: readonly RowProblem[]; readonly more: boolean }> {
    return this.#call('GET', `/clients/${seg(clientId)}/jobs/${seg(jobId)}/row-problems`, {
      query: { limit: String(limit) },
    });
  }

  optOuts(
    clientId: string,
    query: { readonly recipient?: string; readonly limit?: string; readonly next?: string },
  ): Promise<OptOutsAnswer> {
    return this.#call('GET', `/clients/${seg(clientId)}/opt-outs`, { query });
  }

  /** Looks recipients up on the client's suppression list (`recipient`), or pages through it. */
  suppressions(
    clientId: string,
    query: { readonly recipient?: string; readonly limit?: string; readonly next?: string },
  ): Promise<SuppressionsAnswer> {
    return this.#call('GET', `/clients/${seg(clientId)}/suppressions`, { query });
  }

  addSuppressions(
    clientId: string,
    body: { recipients: string[]; reason?: string },
  ): Promise<SuppressionsAnswer> {
    return this.#call('POST', `/clients/${seg(clientId)}/suppressions`, { json: body });
  }

  removeSuppression(clientId: string, recipient: string): Promise<SuppressionView> {
    return this.#call('DELETE', `/clients/${seg(clientId)}/suppressions/${seg(recipient)}`);
  }

  uploadSuppressions(clientId: string, csv: Uint8Array, reason?: string): Promise<SuppressionUploadAnswer> {
    return this.#call('POST', `/clients/${seg(clientId)}/suppressions`, {
      csv,
      query: { reason },
    });
  }

  /**
   * The job's report. A large one is answered 303 with a presigned S3 URL: followed here without
   * the request's signature (S3 authorises the URL's own), and never printed.
   */
  async report(clientId: string, jobId: string): Promise<ReportDownload> {
    const path = `/clients/${seg(clientId)}/jobs/${seg(jobId)}/report`;
    const url = this.#url(path);
    const answer = await this.#send('GET', url, { redirect: 'manual', download: true });
    const about = {
      ...(answer.headers.get('x-switchboard-job-status')
        ? { jobStatus: answer.headers.get('x-switchboard-job-status')! }
        : {}),
      ...(answer.headers.get('x-switchboard-waiting-message')
        ? { waiting: decodeURI(answer.headers.get('x-switchboard-waiting-message')!) }
        : {}),
    };
    let response = answer;
    if (answer.status === 303) {
      await answer.body?.cancel();
      const location = answer.headers.get('location');
      if (!location) throw new OpsError(`GET ${path}: 303 without a location`);
      const s3 = new URL(location);
      try {
        response = await fetch(s3);
      } catch (error) {
        throw networkErrorOf(error, s3, false);
      }
      if (!response.ok) {
        const code = /<Code>([^<]*)<\/Code>/.exec(await response.text())?.[1];
        throw new OpsError(
          `downloading the report from S3 failed: ${response.status}${code ? ` ${code}` : ''}`,
        );
      }
    } else if (!answer.ok) {
      throw apiErrorOf('GET', path, answer.status, await answer.text());
    }
    if (!response.body) throw new OpsError(`GET ${path}: an empty answer`);
    return { body: response.body, ...about };
  }
}
