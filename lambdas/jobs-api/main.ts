/** Wires the operator API to the real AWS clients; configuration is read once, at start. */
import {
  makeDocumentClient,
  makeS3Client,
  makeS3PresignClient,
  makeSqsClient,
} from '#shared/adapters/aws-clients.ts';
import { DynamoClientStore } from '#shared/adapters/dynamo-clients.ts';
import { DynamoJobSeries } from '#shared/adapters/dynamo-job-series.ts';
import { DynamoTaskStore } from '#shared/adapters/dynamo-job-tasks.ts';
import { DynamoJobStore } from '#shared/adapters/dynamo-jobs.ts';
import { DynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import { DynamoOptOutStore } from '#shared/adapters/dynamo-opt-outs.ts';
import { DynamoOutcomeSecretWriter } from '#shared/adapters/dynamo-outcome-webhooks.ts';
import { DynamoOutstandingHeads } from '#shared/adapters/dynamo-outstanding-heads.ts';
import { DynamoPeopleStore } from '#shared/adapters/dynamo-people.ts';
import { DynamoPersonHistory } from '#shared/adapters/dynamo-person-history.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import { lambdaObservability } from '#shared/adapters/lambda-observability.ts';
import { S3UploadFiles, S3ValidationReportStore } from '#shared/adapters/s3-uploads.ts';
import { SqsIngestQueue } from '#shared/adapters/sqs-ingest-queue.ts';
import { makeHttpBrokerNotifier } from '#shared/broker/notify.ts';
import { clockFromEnv, getStringFromEnv } from '#shared/config.ts';
import { JobsApi } from '#shared/jobs/api.ts';
import { PeopleApi } from '#shared/people/api.ts';
import { SuppressionsApi } from '#shared/suppressions/api.ts';
import { makeJobsApiHandler } from './handler.ts';

const { log, observe } = lambdaObservability('jobs-api');

const controlTable = getStringFromEnv('CONTROL_TABLE');
const tasksTable = getStringFromEnv('TASKS_TABLE');
const bucket = getStringFromEnv('UPLOAD_BUCKET');
const ingestQueueUrl = getStringFromEnv('INGEST_QUEUE_URL');

const doc = makeDocumentClient();
const s3 = makeS3Client();
const sqs = makeSqsClient();

const leases = new DynamoLeaseStore(doc, controlTable);
const clients = new DynamoClientStore(doc, controlTable);
// The system's time (the local cloud may shift it: `npm start -- --at`).
const clock = clockFromEnv();

export const handler = observe(
  makeJobsApiHandler({
    api: new JobsApi({
      clients: new DynamoClientStore(doc, controlTable),
      jobs: new DynamoJobStore(doc, controlTable),
      tasks: new DynamoTaskStore(doc, tasksTable),
      files: new S3UploadFiles(s3, bucket, makeS3PresignClient()),
      validationReports: new S3ValidationReportStore(s3, bucket),
      queue: new SqsIngestQueue(sqs, ingestQueueUrl),
      bucket,
      clock: clock,
      // Leases live in the control table; the holder's endpoint is a private address in the fleet's
      // VPC, which this function runs in (cdk/constructs/jobs.ts).
      brokers: { leases, notifier: makeHttpBrokerNotifier(), log },
      calls: leases,
      optOuts: new DynamoOptOutStore(doc, controlTable),
      outcomeWebhooks: {
        secrets: new DynamoOutcomeSecretWriter(doc, getStringFromEnv('CHANNELS_TABLE')),
        // Only the local cloud sets it: in AWS an outcome webhook URL must be https.
        policy: { allowLoopbackHttp: process.env.OUTCOME_WEBHOOK_ALLOW_LOOPBACK_HTTP === 'true' },
      },
      // Each job's series (the console's chart): Query of `{jobId}#series` in the tasks table.
      series: new DynamoJobSeries(doc, tasksTable),
      // Set by Lambda in every function's environment; the local cloud sets it too.
      region: getStringFromEnv('AWS_REGION'),
      // A call job's first waiting task: the head of its client's outstanding index (tasks table).
      heads: new DynamoOutstandingHeads(doc, tasksTable),
    }),
    suppressions: new SuppressionsApi({
      clients,
      store: new DynamoSuppressionStore(doc, controlTable),
      clock,
    }),
    people: new PeopleApi({
      clients,
      store: new DynamoPeopleStore(doc, controlTable),
      // A person's history: the tasks table's byRecipient index, the tasks and their jobs.
      tasks: new DynamoPersonHistory(doc, tasksTable, controlTable),
    }),
    log,
  }),
);
