/**
 * The job manager on the local cloud: the same use case, DynamoDB adapter and Lambda handler as
 * deployed, with the local broker service as its scaler and the fleet's current version as the
 * desired one (on AWS both come from the same deployment), and the local ingest queue for the
 * expire sweeps of jobs past their end. `publishDesiredVersion`
 * (shared/adapters/dynamo-fleet.ts) is the local
 * fleet's `onDeploy`: it makes brokers of other versions drain at once, without waiting for the
 * next run.
 */
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { ScheduledEvent } from 'aws-lambda';
import { type JobManagerRun, makeJobManagerHandler } from '#lambdas/job-manager/handler.ts';
import { makeSqsClient } from '#shared/adapters/aws-clients.ts';
import { DynamoFleetStore } from '#shared/adapters/dynamo-fleet.ts';
import { DynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import { PowertoolsLog } from '#shared/adapters/powertools.ts';
import { SqsIngestQueue } from '#shared/adapters/sqs-ingest-queue.ts';
import { clockFromEnv } from '#shared/config.ts';
import { makeRunJobManager } from '#shared/fleet/job-manager.ts';
import type { EcsServiceScaler } from '#shared/fleet/ports.ts';
import { RunLease, runLeaseMs } from '#shared/fleet/run-lease.ts';
import { functions } from '#shared/functions.ts';
import { keys } from '#shared/jobs/model.ts';
import type { Logger } from '#shared/log.ts';
import { LOCAL_CREDENTIALS, type LocalCloudInfo } from './cloud.ts';
import type { Handler } from './lambda.ts';

export interface LocalJobManagerOptions {
  readonly doc: DynamoDBDocumentClient;
  readonly controlTable: string;
  readonly tasksTable: string;
  /** The local broker service (`LocalFleet`). */
  readonly fleet: EcsServiceScaler & { readonly version: string };
  readonly maxBrokers: number;
  /** The local cloud: its ingest queue is where expire sweeps go, as on AWS. */
  readonly cloud: Pick<LocalCloudInfo, 'region' | 'sqsEndpoint' | 'queues'>;
  readonly lookaheadMs?: number;
  /** The job manager's budget of client reads (`JobManagerOptions.maxTaskReadsPerRun`); the bench lifts it to prime hints. */
  readonly maxTaskReadsPerRun?: number;
  /** The job manager's time for reads (`JobManagerOptions.readForMs`); the bench lifts it. */
  readonly readForMs?: number;
  /** The job manager's clock; default the deployment's (`clockFromEnv`: the wall clock, maybe shifted). */
  readonly now?: () => number;
  readonly log?: Logger;
}

/** The job manager's handler wired to the local cloud and fleet; run it with `startScheduler`. */
export function makeLocalJobManager(options: LocalJobManagerOptions): Handler<ScheduledEvent, JobManagerRun> {
  const clock = options.now ? { now: options.now } : clockFromEnv();
  const log = options.log ?? new PowertoolsLog('job-manager');
  return makeJobManagerHandler({
    run: makeRunJobManager({
      store: new DynamoFleetStore(options.doc, {
        controlTable: options.controlTable,
        tasksTable: options.tasksTable,
      }),
      scaler: options.fleet,
      sweeps: localIngestQueue(options.cloud),
      clock,
      maxBrokers: options.maxBrokers,
      desiredVersion: () => options.fleet.version,
      ...(options.lookaheadMs === undefined ? {} : { lookaheadMs: options.lookaheadMs }),
      ...(options.maxTaskReadsPerRun === undefined ? {} : { maxTaskReadsPerRun: options.maxTaskReadsPerRun }),
      ...(options.readForMs === undefined ? {} : { readForMs: options.readForMs }),
    }),
    // The deployed run lease, in the same table, with the same length.
    runLease: new RunLease({
      store: new DynamoLeaseStore(options.doc, options.controlTable, { key: keys.runLease }),
      clock,
      leaseMs: runLeaseMs(functions['job-manager'].timeoutSeconds),
      log,
    }),
    log,
  });
}

/** The local cloud's ingest queue, sent to as the deployed job manager sends to SQS. */
export function localIngestQueue(cloud: LocalJobManagerOptions['cloud']) {
  const sqs = makeSqsClient({
    region: cloud.region,
    credentials: LOCAL_CREDENTIALS,
    endpoint: cloud.sqsEndpoint,
  });
  return new SqsIngestQueue(sqs, cloud.queues.ingest!.url);
}
