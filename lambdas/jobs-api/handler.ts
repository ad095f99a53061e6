/**
 * The operator API (API Gateway HTTP API → Lambda): client settings and jobs. Parses the request,
 * calls one use case, maps its result and typed errors to HTTP. The same routes arrive twice: as
 * IAM-authorised operator calls, and under `/console/api` from the console with a user pool token
 * (verified by the gateway's JWT authorizer), answered only for a client the user belongs to.
 */
import middy from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import {
  answerOrRefuse,
  decodeRequestBody,
  getHeader,
  jsonRequestBody,
  jsonResponse,
  MalformedRequestError,
} from '#shared/http/api-gateway.ts';
import { HttpError } from '#shared/http/errors.ts';
import type { JobAction, JobsApi, JobView } from '#shared/jobs/api.ts';
import {
  ClientNotFoundError,
  IllegalTransitionError,
  JobNotFoundError,
  UploadTooLargeError,
  ValidationError,
} from '#shared/jobs/errors.ts';
import { jobOptionsFromQuery } from '#shared/jobs/validation.ts';
import type { Logger } from '#shared/log.ts';
import { consoleOperator, consoleRefusal } from '#shared/operators/console-request.ts';
import type { PeopleApi } from '#shared/people/api.ts';
import { ENDED_TASK_RETENTION_DAYS } from '#shared/resources.ts';
import { CONSOLE_API_PREFIX, operatorRouteKey } from '#shared/routes.ts';
import type { SuppressionsApi } from '#shared/suppressions/api.ts';

/** The one mapping from the jobs use cases' typed errors to HTTP statuses. */
export function toHttpError(error: unknown): APIGatewayProxyStructuredResultV2 | undefined {
  if (error instanceof ValidationError)
    return jsonResponse(400, { message: error.message, fieldErrors: error.fieldErrors });
  if (error instanceof MalformedRequestError)
    return jsonResponse(400, { message: error.message, fieldErrors: {} });
  if (error instanceof ClientNotFoundError || error instanceof JobNotFoundError) {
    return jsonResponse(404, { message: error.message });
  }
  if (error instanceof IllegalTransitionError)
    return jsonResponse(409, { message: error.message, status: error.current });
  if (error instanceof UploadTooLargeError) return jsonResponse(413, { message: error.message });
  if (error instanceof UnsupportedMediaTypeError) return jsonResponse(415, { message: error.message });
  return undefined;
}

/**
 * A CSV posted inline: `text/csv` (UTF-8 text), or `application/octet-stream` for other encodings.
 * A `text/csv` body in another charset is refused (415): it reaches the function as text, already
 * read as UTF-8, so a Shift_JIS list's Japanese would be lost; its bytes travel intact as
 * `application/octet-stream` or through the presigned upload.
 */
function isCsvUpload(event: APIGatewayProxyEventV2): boolean {
  const [type = '', ...params] = (getHeader(event.headers, 'content-type') ?? '').split(';');
  const mediaType = type.trim().toLowerCase();
  if (mediaType === 'text/csv') {
    const charset = params
      .map((p) => p.trim().toLowerCase())
      .find((p) => p.startsWith('charset='))
      ?.slice('charset='.length)
      .replace(/^"|"$/g, '');
    if (charset !== undefined && !['utf-8', 'utf8', 'us-ascii'].includes(charset)) {
      throw new UnsupportedMediaTypeError(
        `a text/csv body must be UTF-8 (got charset=${charset}): send a list in another encoding as application/octet-stream, or create the job with a JSON body and PUT the file to the presigned upload URL it answers`,
      );
    }
  }
  return mediaType === 'text/csv' || mediaType === 'application/octet-stream';
}

/** A new job's JSON options; a body that is not JSON names the media types a list may come as. */
function jobRequestBody(event: APIGatewayProxyEventV2): unknown {
  try {
    return jsonRequestBody(event);
  } catch (error) {
    if (!(error instanceof MalformedRequestError)) throw error;
    const type = getHeader(event.headers, 'content-type') ?? 'none';
    throw new MalformedRequestError(
      `the body is not JSON (content-type: ${type}): send the job's options as application/json, or the list itself as text/csv (UTF-8) or application/octet-stream (any encoding) with the options in the query string`,
      { cause: error },
    );
  }
}

/** A body in a media type or charset the route cannot read (answered 415). */
class UnsupportedMediaTypeError extends HttpError {}

/**
 * Where the job stands, on the report's response: a report of a job still running says so, and
 * what it waits for, without a line in the CSV that spreadsheet imports would trip on. Header
 * values are ASCII: the message is percent-encoded where it is not.
 */
function reportHeaders(job: JobView): Record<string, string> {
  const headers: Record<string, string> = {
    'x-switchboard-job-status': job.status,
    // Ended tasks are deleted this many days after their end: an older job's report lists fewer rows than its counts.
    'x-switchboard-task-retention-days': String(ENDED_TASK_RETENTION_DAYS),
  };
  if (job.waiting) {
    headers['x-switchboard-waiting'] = job.waiting.reason;
    if (job.waiting.until) headers['x-switchboard-waiting-until'] = job.waiting.until;
    const message = job.waiting.message;
    headers['x-switchboard-waiting-message'] = /^[\x20-\x7e]*$/.test(message) ? message : encodeURI(message);
  }
  return headers;
}

/** Every client: an operator whose IAM policy names this route, or a console administrator. */
async function listAllClients(api: JobsApi, event: APIGatewayProxyEventV2) {
  const operator = consoleOperator(event);
  if (operator && !operator.admin)
    return jsonResponse(403, { message: 'Forbidden: only administrators list every client' });
  return jsonResponse(200, await api.listClients(event.queryStringParameters ?? {}));
}

/** The suppression list's routes: look up or page, add (JSON) or upload (CSV), remove. */
async function suppressionRoute(
  suppressions: SuppressionsApi,
  clientId: string,
  event: APIGatewayProxyEventV2,
): Promise<APIGatewayProxyStructuredResultV2> {
  const query = event.queryStringParameters ?? {};
  switch (event.routeKey.slice(0, event.routeKey.indexOf(' '))) {
    case 'GET':
      return jsonResponse(200, await suppressions.find(clientId, query));
    case 'DELETE':
      return jsonResponse(200, await suppressions.remove(clientId, event.pathParameters?.recipient ?? ''));
    default:
      if (isCsvUpload(event))
        return jsonResponse(200, await suppressions.upload(clientId, decodeRequestBody(event), query));
      return jsonResponse(200, await suppressions.add(clientId, jsonRequestBody(event)));
  }
}

/** People's routes: look up an identifier's person (and their history), link identifiers (JSON) or upload them (CSV), take one out. */
async function peopleRoute(
  people: PeopleApi,
  clientId: string,
  event: APIGatewayProxyEventV2,
): Promise<APIGatewayProxyStructuredResultV2> {
  const identifier = event.pathParameters?.identifier ?? '';
  if (event.routeKey.endsWith('/history'))
    return jsonResponse(200, await people.history(clientId, identifier));
  switch (event.routeKey.slice(0, event.routeKey.indexOf(' '))) {
    case 'GET':
      return jsonResponse(200, await people.get(clientId, identifier));
    case 'DELETE':
      return jsonResponse(200, await people.unlink(clientId, identifier));
    default:
      if (isCsvUpload(event))
        return jsonResponse(200, await people.upload(clientId, decodeRequestBody(event)));
      return jsonResponse(200, await people.link(clientId, jsonRequestBody(event)));
  }
}

/** The report: in the response when small, else a 303 to the object in the bucket. */
function reportResponse(
  report: Awaited<ReturnType<JobsApi['report']>>,
  jobId: string,
): APIGatewayProxyStructuredResultV2 {
  const about = reportHeaders(report.job);
  if (report.kind === 'redirect')
    return { statusCode: 303, headers: { location: report.url, ...about }, body: '' };
  return {
    statusCode: 200,
    headers: {
      ...about,
      'content-type': 'text/csv; charset=utf-8',
      'content-disposition': `attachment; filename="job-${jobId}-report.csv"`,
    },
    body: report.csv.toString('base64'),
    isBase64Encoded: true,
  };
}

/** What the operator API's handler works with. */
interface JobsApiHandlerDeps {
  readonly api: JobsApi;
  /** The suppression list's routes; without it they fail (a handler wired for the jobs only). */
  readonly suppressions?: SuppressionsApi;
  /** People's routes; without it they fail. */
  readonly people?: PeopleApi;
  readonly log: Logger;
}

export function makeJobsApiHandler(deps: JobsApiHandlerDeps) {
  const route = (event: APIGatewayProxyEventV2) => operatorRoute(deps, event);
  return middy(answerOrRefuse(route, { toHttpError, log: deps.log, logRefusalReason: true }));
}

/** Answers one request: refused for a console user of another client, else by its route. */
async function operatorRoute(
  deps: JobsApiHandlerDeps,
  event: APIGatewayProxyEventV2,
): Promise<APIGatewayProxyStructuredResultV2> {
  const refused = consoleRefusal(event);
  if (refused) return refused;
  if (event.routeKey === `GET ${CONSOLE_API_PREFIX}/me`) return jsonResponse(200, consoleOperator(event));
  const routeKey = operatorRouteKey(event.routeKey);
  return (await jobRoute(deps.api, routeKey, event)) ?? clientRoute(deps, routeKey, event);
}

/** The routes of a client and its lists (settings, pause, opt-outs, suppressions); 404 for any other. */
async function clientRoute(
  deps: JobsApiHandlerDeps,
  routeKey: string,
  event: APIGatewayProxyEventV2,
): Promise<APIGatewayProxyStructuredResultV2> {
  const { api } = deps;
  const clientId = event.pathParameters?.clientId ?? '';
  switch (routeKey) {
    case 'GET /clients':
      return listAllClients(api, event);
    case 'PUT /clients/{clientId}':
      return jsonResponse(200, await api.putClient(clientId, jsonRequestBody(event)));
    case 'GET /clients/{clientId}':
      return jsonResponse(200, await api.getClient(clientId));
    case 'POST /clients/{clientId}/pause':
    case 'POST /clients/{clientId}/resume':
      return jsonResponse(200, await api.setClientPaused(clientId, event.routeKey.endsWith('/pause')));
    case 'GET /clients/{clientId}/opt-outs':
      return jsonResponse(200, await api.optOuts(clientId, event.queryStringParameters ?? {}));
    case 'GET /clients/{clientId}/suppressions':
    case 'POST /clients/{clientId}/suppressions':
    case 'DELETE /clients/{clientId}/suppressions/{recipient}':
      return suppressionRoute(wiredSuppressions(deps), clientId, event);
    case 'GET /clients/{clientId}/people/{identifier}':
    case 'GET /clients/{clientId}/people/{identifier}/history':
    case 'POST /clients/{clientId}/people':
    case 'DELETE /clients/{clientId}/people/{identifier}':
      return peopleRoute(wiredPeople(deps), clientId, event);
    default:
      return jsonResponse(404, { message: 'Not Found' });
  }
}

/** The suppression list's routes, or an error when the handler was wired without them. */
function wiredSuppressions(deps: JobsApiHandlerDeps): SuppressionsApi {
  if (!deps.suppressions) throw new Error('no suppression list is wired into the operator API');
  return deps.suppressions;
}

/** People's routes, or an error when the handler was wired without them. */
function wiredPeople(deps: JobsApiHandlerDeps): PeopleApi {
  if (!deps.people) throw new Error('no people store is wired into the operator API');
  return deps.people;
}

/** The routes of a client's jobs; undefined for a route that is not one of them. */
async function jobRoute(
  api: JobsApi,
  routeKey: string,
  event: APIGatewayProxyEventV2,
): Promise<APIGatewayProxyStructuredResultV2 | undefined> {
  const clientId = event.pathParameters?.clientId ?? '';
  const jobId = event.pathParameters?.jobId ?? '';
  const query = () => event.queryStringParameters ?? {};
  switch (routeKey) {
    case 'POST /clients/{clientId}/jobs':
      return createJob(api, clientId, event);
    case 'GET /clients/{clientId}/jobs':
      return jsonResponse(200, await api.listJobs(clientId, query()));
    case 'GET /clients/{clientId}/jobs/{jobId}':
      return jsonResponse(200, await api.getJob(clientId, jobId, query()));
    case 'POST /clients/{clientId}/jobs/{jobId}/pause':
    case 'POST /clients/{clientId}/jobs/{jobId}/resume':
    case 'POST /clients/{clientId}/jobs/{jobId}/cancel': {
      const action = event.routeKey.slice(event.routeKey.lastIndexOf('/') + 1) as JobAction;
      return jsonResponse(200, await api.changeStatus(clientId, jobId, action));
    }
    case 'GET /clients/{clientId}/jobs/{jobId}/series':
      return jsonResponse(200, await api.jobSeries(clientId, jobId, query()));
    case 'GET /clients/{clientId}/jobs/{jobId}/row-problems':
      return jsonResponse(200, await api.rowProblems(clientId, jobId, query()));
    case 'GET /clients/{clientId}/jobs/{jobId}/report':
      return reportResponse(await api.report(clientId, jobId), jobId);
    default:
      return undefined;
  }
}

/** A new job: from an uploaded CSV with its options in the query, or from a JSON body. */
async function createJob(
  api: JobsApi,
  clientId: string,
  event: APIGatewayProxyEventV2,
): Promise<APIGatewayProxyStructuredResultV2> {
  if (isCsvUpload(event)) {
    const options = jobOptionsFromQuery(event.queryStringParameters ?? {});
    return jsonResponse(201, await api.createJob(clientId, options, decodeRequestBody(event)));
  }
  return jsonResponse(201, await api.createJob(clientId, jobRequestBody(event)));
}
