/**
 * The broker process (`node worker/main.ts`; the container's entrypoint). Prints one JSON line
 * `{"event":"ready","brokerId","version","httpUrl"}` on stdout when ready, JSON log lines after,
 * and exits 0 once stopped: on SIGTERM (calls in flight get up to BROKER_STOP_GRACE_MS, default
 * 100 s, inside Fargate's 120 s) or when the job manager asks its version to drain.
 */
import { PowertoolsLog } from '#shared/adapters/powertools.ts';
import { readBrokerConfig } from './config.ts';
import { startBrokerProcess } from './process.ts';

const config = readBrokerConfig();
const logger = new PowertoolsLog('broker');
// Listen before starting: ECS may stop a task while it is still starting, and a SIGTERM without a
// listener would kill the process mid-write instead of letting it stop cleanly.
let stopRequested = false;
let running: Awaited<ReturnType<typeof startBrokerProcess>> | undefined;
const onSignal = () => {
  stopRequested = true;
  void running?.stop('sigterm');
};
process.on('SIGTERM', onSignal);
process.on('SIGINT', onSignal);
running = await startBrokerProcess(config, { logger });
process.stdout.write(
  `${JSON.stringify({ event: 'ready', brokerId: running.brokerId, version: running.version, httpUrl: running.httpUrl })}\n`,
);
if (stopRequested) void running.stop('sigterm');
await running.done;
logger.info('broker exiting', { brokerId: running.brokerId });
process.exit(0);
