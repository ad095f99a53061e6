import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { makeJobsApiHandler } from '#lambdas/jobs-api/handler.ts';
import { JobsApi } from '#shared/jobs/api.ts';
import type { ValidationError } from '#shared/jobs/errors.ts';
import { parseOptOutQuery } from '#shared/jobs/opt-outs.ts';
import type { OptOutReader, OptOutRecord } from '#shared/jobs/ports.ts';
import { silentLogger } from '#shared/log.ts';
import { matchRoute, routeKey, routes } from '#shared/routes.ts';
import {
  memoryClients,
  memoryFiles,
  memoryJobs,
  memoryQueue,
  memoryReports,
  memoryTasks,
  TOKYO_CLIENT,
} from './fakes.ts';

const LINE_USER = `U${'a'.repeat(32)}`;
const AT = Date.parse('2026-11-20T00:00:00Z');

/** Opt-outs kept per client, as the control table keeps them (`OPTOUT#{clientId}` / recipient). */
function memoryOptOuts(records: Record<string, OptOutRecord[]>): OptOutReader {
  return {
    async records(clientId, recipients) {
      return (records[clientId] ?? []).filter((r) => recipients.includes(r.recipient));
    },
    async page(clientId, page) {
      const out = (records[clientId] ?? [])
        .filter((r) => r.optedOut)
        .sort((a, b) => a.recipient.localeCompare(b.recipient));
      const from = page.next === undefined ? 0 : Number(page.next);
      const next = from + page.limit < out.length ? String(from + page.limit) : undefined;
      return { records: out.slice(from, from + page.limit), ...(next ? { next } : {}) };
    },
  };
}

async function setup() {
  const clients = memoryClients();
  const api = new JobsApi({
    region: 'ap-northeast-1',
    clients,
    jobs: memoryJobs(),
    tasks: memoryTasks(),
    files: memoryFiles(),
    validationReports: memoryReports(),
    queue: memoryQueue(),
    bucket: 'uploads-bucket',
    clock: { now: () => AT },
    optOuts: memoryOptOuts({
      acme: [
        { recipient: '+819012345678', optedOut: true, eventAt: AT - 1000 },
        { recipient: LINE_USER, optedOut: false, eventAt: AT - 500 },
        { recipient: '+819087654321', optedOut: true, eventAt: AT - 200 },
      ],
      other: [{ recipient: '+819011112222', optedOut: true, eventAt: AT }],
    }),
  });
  await api.putClient('acme', TOKYO_CLIENT);
  await api.putClient('other', TOKYO_CLIENT);
  const handler = makeJobsApiHandler({ api, log: silentLogger });
  const get = async (path: string, query?: Record<string, string>) => {
    const match = matchRoute(routes, 'GET', path)!;
    const event = {
      version: '2.0',
      routeKey: routeKey(match.route),
      rawPath: path,
      rawQueryString: new URLSearchParams(query).toString(),
      headers: {},
      pathParameters: match.pathParameters,
      ...(query ? { queryStringParameters: query } : {}),
      isBase64Encoded: false,
    } as unknown as APIGatewayProxyEventV2;
    const result = (await handler(event, {} as Context)) as APIGatewayProxyStructuredResultV2;
    return { status: result.statusCode, body: JSON.parse(result.body ?? '{}') };
  };
  return { api, get };
}

describe('opt-out query', () => {
  it('reads recipients as a list row would: E.164 in the client region, LINE user ids as is', () => {
    expect(
      parseOptOutQuery({ recipient: '090-1234-5678, ０９０８７６５４３２１,' + LINE_USER }, TOKYO_CLIENT),
    ).toEqual({
      kind: 'lookup',
      recipients: [
        { input: '090-1234-5678', recipient: '+819012345678' },
        { input: '０９０８７６５４３２１', recipient: '+819087654321' },
        { input: LINE_USER, recipient: LINE_USER },
      ],
    });
    expect(parseOptOutQuery({}, TOKYO_CLIENT)).toEqual({ kind: 'list', limit: 50 });
    expect(parseOptOutQuery({ limit: '10', next: 'abc' }, TOKYO_CLIENT)).toEqual({
      kind: 'list',
      limit: 10,
      next: 'abc',
    });
  });

  it('names each bad parameter', () => {
    const fieldErrors = (query: Record<string, string>) => {
      try {
        parseOptOutQuery(query, TOKYO_CLIENT);
      } catch (error) {
        return (error as ValidationError).fieldErrors;
      }
      throw new Error('no error');
    };
    expect(fieldErrors({ recipient: '123,abc' }).recipient).toEqual([
      '"123" is neither a phone number nor a LINE user id (U + 32 hex digits)',
      '"abc" is neither a phone number nor a LINE user id (U + 32 hex digits)',
    ]);
    expect(fieldErrors({ recipient: ' , ' }).recipient).toEqual([
      'must name a phone number or a LINE user id',
    ]);
    expect(fieldErrors({ recipient: Array(101).fill('09012345678').join(',') }).recipient).toEqual([
      'may name at most 100 recipients at once',
    ]);
    expect(fieldErrors({ limit: '0' }).limit).toEqual(['must be a whole number from 1 to 500']);
    expect(fieldErrors({ channelId: 'x' }).channelId).toEqual(['is not a known parameter']);
    expect(fieldErrors({ recipient: LINE_USER, limit: '5' }).limit).toEqual([
      'pages the list: not with recipient',
    ]);
  });
});

describe('GET /clients/{clientId}/opt-outs', () => {
  it("looks recipients up in the client's own list: opted out, opted back in, never recorded", async () => {
    const { get } = await setup();
    const answer = await get('/clients/acme/opt-outs', {
      recipient: `090-1234-5678,${LINE_USER},+819011112222`,
    });
    expect(answer).toEqual({
      status: 200,
      body: {
        optOuts: [
          {
            recipient: '+819012345678',
            input: '090-1234-5678',
            optedOut: true,
            since: new Date(AT - 1000).toISOString(),
          },
          { recipient: LINE_USER, optedOut: false, since: new Date(AT - 500).toISOString() },
          // Opted out of client "other" only: acme's list does not have it.
          { recipient: '+819011112222', optedOut: false },
        ],
      },
    });
  });

  it("pages through the client's opted-out recipients only", async () => {
    const { get } = await setup();
    const first = await get('/clients/acme/opt-outs', { limit: '1' });
    expect(first.body.optOuts.map((o: { recipient: string }) => o.recipient)).toEqual(['+819012345678']);
    const second = await get('/clients/acme/opt-outs', { limit: '1', next: first.body.next });
    expect(second.body).toEqual({
      optOuts: [{ recipient: '+819087654321', optedOut: true, since: new Date(AT - 200).toISOString() }],
    });
  });

  it('answers 400 with field errors for a bad query and 404 for an unknown client', async () => {
    const { get } = await setup();
    expect(await get('/clients/acme/opt-outs', { recipient: 'nope' })).toEqual({
      status: 400,
      body: {
        message: 'invalid opt-out query',
        fieldErrors: {
          recipient: ['"nope" is neither a phone number nor a LINE user id (U + 32 hex digits)'],
        },
      },
    });
    expect((await get('/clients/nobody/opt-outs')).status).toBe(404);
  });
});
