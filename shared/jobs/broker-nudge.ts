/**
 * Pausing or cancelling a message job is exact (`api.ts`): once the new status is written, the broker
 * holding the client's lease is told, and the answer waits for it to confirm no new send starts.
 */
import type { LeaseEndpointReader } from '#shared/broker/ports.ts';
import type { Logger } from '#shared/log.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import { isMessageChannel, type Job } from './model.ts';
import type { JobChangeNotifier } from './ports.ts';

/** How the operator API reaches the broker serving a client, to stop a message job's sends. */
export interface BrokerNudgeDeps {
  /** Where the client's live lease holder listens (the lease item's endpoint). */
  readonly leases: LeaseEndpointReader;
  readonly notifier: JobChangeNotifier;
  /** A nudge that did not land is a warning: the broker's job watch stops the sends instead. */
  readonly log: Pick<Logger, 'warn'>;
}

/** Tells the client's broker that a message job left `running`, and waits for its answer. */
export class BrokerNudge {
  readonly #brokers: BrokerNudgeDeps;
  readonly #clock: Clock;

  constructor(brokers: BrokerNudgeDeps, clock: Clock) {
    this.#brokers = brokers;
    this.#clock = clock;
  }

  /**
   * After a message job left `running` (pause, cancel): nudges the lease holder and waits until it
   * answers that no new send of the job starts. No live holder means nothing is sending. Never
   * throws: the status is already written, and the operator must get the answer.
   */
  async stopSends(job: Job): Promise<void> {
    const brokers = this.#brokers;
    if (!isMessageChannel(job.channel)) return;
    const { clientId, jobId } = job;
    let endpoint: string | undefined;
    try {
      endpoint = await brokers.leases.endpointOf(clientId, this.#clock.now());
    } catch (error) {
      brokers.log.warn("the client's broker could not be looked up; its job watch stops the sends", {
        clientId,
        jobId,
        status: job.status,
        error,
      });
      return;
    }
    if (endpoint === undefined) return;
    const answer = await brokers.notifier.jobChanged(endpoint, { clientId, jobId });
    if (!answer.ok) {
      brokers.log.warn("the client's broker did not confirm the job change; its job watch stops the sends", {
        clientId,
        jobId,
        status: job.status,
        endpoint,
        reason: answer.reason,
      });
    }
  }
}
