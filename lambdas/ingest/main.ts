/** Wires the ingest to the real AWS clients; configuration is read once, at start. */
import { makeDocumentClient, makeS3Client, makeSqsClient } from '#shared/adapters/aws-clients.ts';
import { DynamoTaskCanceller } from '#shared/adapters/dynamo-cancel.ts';
import { DynamoClientStore } from '#shared/adapters/dynamo-clients.ts';
import { DynamoTaskStore } from '#shared/adapters/dynamo-job-tasks.ts';
import { DynamoJobStore } from '#shared/adapters/dynamo-jobs.ts';
import { DynamoOptOutStore } from '#shared/adapters/dynamo-opt-outs.ts';
import { DynamoPeopleStore } from '#shared/adapters/dynamo-people.ts';
import { DynamoTaskRetimer } from '#shared/adapters/dynamo-retime.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import { lambdaObservability } from '#shared/adapters/lambda-observability.ts';
import { S3UploadFiles, S3ValidationReportStore } from '#shared/adapters/s3-uploads.ts';
import { SqsIngestQueue } from '#shared/adapters/sqs-ingest-queue.ts';
import { clockFromEnv, getNumberFromEnv, getStringFromEnv } from '#shared/config.ts';
import { JobSweep } from '#shared/jobs/cancel.ts';
import { JobIngest } from '#shared/jobs/ingest.ts';
import { ReportArchiver } from '#shared/jobs/report-archive.ts';
import { RetimeSweep } from '#shared/jobs/retime.ts';
import { makeIngestHandler } from './handler.ts';

// The system's time (the local cloud may shift it: `npm start -- --at`).
const clock = clockFromEnv();

const { log, observe } = lambdaObservability('ingest');

const controlTable = getStringFromEnv('CONTROL_TABLE');
const tasksTable = getStringFromEnv('TASKS_TABLE');
const bucket = getStringFromEnv('UPLOAD_BUCKET');
const queueUrl = getStringFromEnv('INGEST_QUEUE_URL');
// 0 (unset): pause only when time runs low. Tests and benchmarks set it to force continuations.
const maxRowsPerRun = getNumberFromEnv('INGEST_MAX_ROWS_PER_RUN', 0);
// 0 (unset): MAX_UPLOAD_BYTES (shared/jobs/upload-limit.ts), the limit the console and the CLI
// say. Tests lower it to see a file refused without uploading a gigabyte.
const maxUploadBytes = getNumberFromEnv('INGEST_MAX_UPLOAD_BYTES', 0);
// 0 (unset): MAX_CHUNKED_LIST_BYTES (shared/jobs/ingest-step.ts); a LINE list past it is held a task
// a recipient. Tests lower it to hold a small list so.
const maxChunkedListBytes = getNumberFromEnv('INGEST_MAX_CHUNKED_LIST_BYTES', 0);

const doc = makeDocumentClient();
const s3 = makeS3Client();
const sqs = makeSqsClient();
const optOuts = new DynamoOptOutStore(doc, controlTable);
const suppressions = new DynamoSuppressionStore(doc, controlTable);
const jobs = new DynamoJobStore(doc, controlTable);
const clients = new DynamoClientStore(doc, controlTable);
const tasks = new DynamoTaskStore(doc, tasksTable);
const files = new S3UploadFiles(s3, bucket);
const validationReports = new S3ValidationReportStore(s3, bucket);
// Continuations, and a sweep's delayed re-check of messages a broker still holds.
const queue = new SqsIngestQueue(sqs, queueUrl);

export const handler = observe(
  makeIngestHandler({
    ingest: new JobIngest({
      clients,
      jobs,
      tasks,
      files,
      validationReports,
      queue,
      optOuts: (clientId, recipients) => optOuts.optedOut(clientId, recipients),
      suppressed: async (clientId, recipients) =>
        new Set((await suppressions.suppressed(clientId, recipients)).keys()),
      people: new DynamoPeopleStore(doc, controlTable),
      clock,
      log,
      ...(maxRowsPerRun > 0 ? { maxRowsPerRun } : {}),
      ...(maxUploadBytes > 0 ? { maxUploadBytes } : {}),
      ...(maxChunkedListBytes > 0 ? { maxChunkedListBytes } : {}),
    }),
    sweep: new JobSweep({
      jobs,
      tasks: new DynamoTaskCanceller(doc, { controlTable, tasksTable }),
      queue,
      clock,
    }),
    retime: new RetimeSweep({
      jobs,
      clients,
      tasks: new DynamoTaskRetimer(doc, tasksTable),
      queue,
      clock,
    }),
    archive: new ReportArchiver({
      jobs,
      tasks,
      files,
      validationReports,
      queue,
      clock,
    }),
    log,
  }),
);
