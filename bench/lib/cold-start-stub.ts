/**
 * The AWS endpoint of bench/cold-start: one HTTP server on 127.0.0.1 that every SDK client of a
 * probed bundle reaches through `AWS_ENDPOINT_URL`. It answers the few JSON-protocol operations a
 * harmless first event (or an import) needs — DynamoDB `GetItem` of the bench channel, SQS
 * `SendMessage`/`SendMessageBatch` (with the MD5s the SQS client checks), Secrets Manager
 * `GetSecretValue` of unsubscribe keys — and refuses any other with an error the SDK understands,
 * counting it, so a bench that needs more says so instead of timing a failure.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The channel the stub's `GetItem` returns: the one the API Gateway fixtures are signed for. */
export const BENCH_CHANNEL = {
  channelId: '1656000001',
  clientId: 'bench-client',
  // test/fixtures/apigw/README.md: the fixtures' signatures are under this secret.
  secret: 'c0ffee00c0ffee00c0ffee00c0ffee00',
};

/** What unsubscribe's keyring reads at import (`shared/adapters/unsubscribe-secret.ts`'s format). */
const UNSUBSCRIBE_KEYS = JSON.stringify({ current: 'k1', k1: 'b'.repeat(64) });

export interface AwsStub {
  readonly url: string;
  /** `X-Amz-Target`s answered, and those refused, since start. */
  readonly answered: Map<string, number>;
  readonly refused: Map<string, number>;
  stop(): Promise<void>;
}

type Operation = (input: Record<string, unknown>) => unknown;

const md5 = (text: string) => createHash('md5').update(text, 'utf8').digest('hex');

const OPERATIONS: Readonly<Record<string, Operation>> = {
  'DynamoDB_20120810.GetItem': (input) => {
    const key = input.Key as { channelId?: { S?: string } } | undefined;
    if (key?.channelId?.S !== BENCH_CHANNEL.channelId) return {};
    return {
      Item: {
        channelId: { S: BENCH_CHANNEL.channelId },
        clientId: { S: BENCH_CHANNEL.clientId },
        secrets: { L: [{ M: { value: { S: BENCH_CHANNEL.secret } } }] },
        accessToken: { S: 'bench-access-token' },
        autoAnswer: { S: 'push' },
        rules: { L: [] },
        updatedAt: { N: '1748854800000' },
      },
    };
  },
  'AmazonSQS.SendMessage': (input) => ({
    MessageId: randomUUID(),
    MD5OfMessageBody: md5(String(input.MessageBody ?? '')),
  }),
  'AmazonSQS.SendMessageBatch': (input) => ({
    Successful: ((input.Entries ?? []) as { Id: string; MessageBody: string }[]).map((entry) => ({
      Id: entry.Id,
      MessageId: randomUUID(),
      MD5OfMessageBody: md5(entry.MessageBody),
    })),
    Failed: [],
  }),
  'secretsmanager.GetSecretValue': (input) => ({
    ARN: input.SecretId,
    Name: 'switchboard-bench-unsubscribe-keys',
    SecretString: UNSUBSCRIBE_KEYS,
    VersionId: 'bench',
  }),
};

function count(map: Map<string, number>, key: string): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}

/** Starts the stub on an ephemeral port of 127.0.0.1. */
export async function startAwsStub(): Promise<AwsStub> {
  const answered = new Map<string, number>();
  const refused = new Map<string, number>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const target = String(req.headers['x-amz-target'] ?? `${req.method} ${req.url}`);
      const operation = OPERATIONS[target];
      const contentType = String(req.headers['content-type'] ?? 'application/x-amz-json-1.0');
      if (!operation) {
        count(refused, target);
        res.writeHead(400, { 'content-type': contentType, 'x-amzn-requestid': randomUUID() });
        res.end(JSON.stringify({ __type: 'UnknownOperationException', message: `stub: ${target}` }));
        return;
      }
      count(answered, target);
      let input: Record<string, unknown> = {};
      try {
        input = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>;
      } catch {
        // Not JSON: the operation gets no input.
      }
      res.writeHead(200, { 'content-type': contentType, 'x-amzn-requestid': randomUUID() });
      res.end(JSON.stringify(operation(input)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    answered,
    refused,
    stop: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
