/**
 * What a broker tells CloudWatch about the clients it serves: per client, once a second
 * (high-resolution, where a second matters for a line's rate), the calls in flight against the
 * contract's limit, the starts against the line's rate, and the messages sent and LINE's 429s per
 * channel; at once, the events an alarm watches (a lease lost without a release, a task
 * protection request that failed) and LINE's monthly quota. Counting is in memory; `flush`
 * publishes one record per client and second, so the cost does not grow with the message rate.
 */

import type { SendObservation } from '#shared/campaign/ports.ts';
import type { LeaseLostReason } from '#shared/lease/lease.ts';
import type { MessageQuota } from '#shared/line/messaging-client.ts';
import type { Logger } from '#shared/log.ts';
import type { FinalCallStatus } from '#shared/telephony/port.ts';

export interface ClientLimits {
  readonly maxConcurrentCalls: number;
  readonly callsPerSecond: number;
}

/** The per-client side the servers report to; every method is cheap and never throws. */
export interface ClientMetrics {
  limits(limits: ClientLimits): void;
  inFlight(calls: number): void;
  /** A call of `jobId` started (the job's series counts it; CloudWatch counts the client's). */
  callStarted(jobId?: string): void;
  sent(channelId: string, observation: SendObservation): void;
  /** A reading of the channel's monthly quota, or `unread` when it could not be read. */
  quota(channelId: string, quota: MessageQuota | 'unread'): void;
}

interface Window {
  limits: ClientLimits | undefined;
  inFlight: number;
  /** Highest calls in flight since the last flush: a one-second peak is what the limit bounds. */
  peakInFlight: number;
  starts: number;
  channels: Map<string, { sent: number; rateLimited: number }>;
}

/** A silent stand-in for servers run without metrics (tests, benchmarks). */
export const noClientMetrics: ClientMetrics = {
  limits: () => {},
  inFlight: () => {},
  callStarted: () => {},
  sent: () => {},
  quota: () => {},
};

/** Where else the per-client counts go: each job's series (`job-series.ts`). */
export interface ClientCountsTee {
  forClient(clientId: string): ClientMetrics;
  released(clientId: string): void;
}

export class BrokerMetrics {
  readonly #log: Logger;
  readonly #windows = new Map<string, Window>();
  readonly #tee: ClientCountsTee | undefined;

  constructor(log: Logger, tee?: ClientCountsTee) {
    this.#log = log;
    this.#tee = tee;
  }

  /** Starts counting for a client this broker now serves. */
  forClient(clientId: string): ClientMetrics {
    const window: Window = {
      limits: undefined,
      inFlight: 0,
      peakInFlight: 0,
      starts: 0,
      channels: new Map(),
    };
    this.#windows.set(clientId, window);
    const counts: ClientMetrics = {
      limits: (limits) => {
        window.limits = limits;
      },
      inFlight: (calls) => {
        window.inFlight = calls;
        window.peakInFlight = Math.max(window.peakInFlight, calls);
      },
      callStarted: () => {
        window.starts += 1;
      },
      sent: (channelId, observation) => {
        const counts = window.channels.get(channelId) ?? { sent: 0, rateLimited: 0 };
        if (observation.outcome === 'delivered') counts.sent += observation.recipients;
        if (observation.outcome === 'rate-limited') counts.rateLimited += 1;
        window.channels.set(channelId, counts);
      },
      quota: (channelId, quota) => this.quota(channelId, quota),
    };
    return this.#tee ? both(counts, this.#tee.forClient(clientId)) : counts;
  }

  /** The client is no longer served here: its last second is published, then nothing more. */
  released(clientId: string): void {
    const window = this.#windows.get(clientId);
    if (window) this.#publish(clientId, window);
    this.#windows.delete(clientId);
    this.#tee?.released(clientId);
  }

  /** A lease lost without a release (expired, or refused by the fence): another broker takes over. */
  leaseLost(clientId: string, reason: LeaseLostReason): void {
    if (reason === 'released') return;
    this.#log.metrics({ LeasesLost: 1 }, { clientId }, { rollUp: true });
  }

  protectionFailed(): void {
    this.#log.metrics({ ProtectionFailures: 1 }, {}, {});
  }

  /**
   * How much of the channel's monthly message quota is used (nothing for a channel without a
   * limit), or one `LineQuotaUnread` when it could not be read.
   */
  quota(channelId: string, quota: MessageQuota | 'unread'): void {
    if (quota === 'unread') {
      this.#log.metrics({ LineQuotaUnread: 1 }, { channelId }, { rollUp: true });
      return;
    }
    if (quota.limit === undefined || quota.limit <= 0) return;
    const percent = Math.min(100, (quota.used / quota.limit) * 100);
    this.#log.metrics(
      { LineQuotaUsedPercent: Math.round(percent * 10) / 10 },
      { channelId },
      { unit: 'Percent', gauge: true, rollUp: true },
    );
  }

  /** Publishes the second that ended for every client served (call this once a second). */
  flush(): void {
    for (const [clientId, window] of this.#windows) this.#publish(clientId, window);
  }

  #publish(clientId: string, window: Window): void {
    const second = { highResolution: true } as const;
    if (window.limits) {
      this.#log.metrics(
        {
          CallsInFlight: window.peakInFlight,
          CallLimit: window.limits.maxConcurrentCalls,
          CallRateLimit: window.limits.callsPerSecond,
        },
        { clientId },
        { ...second, gauge: true },
      );
    }
    this.#log.metrics({ CallStarts: window.starts }, { clientId }, { ...second, rollUp: true });
    for (const [channelId, counts] of window.channels) {
      this.#log.metrics(
        { MessagesSent: counts.sent, LineRateLimited: counts.rateLimited },
        { clientId, channelId },
        { ...second, rollUp: true },
      );
    }
    window.peakInFlight = window.inFlight;
    window.starts = 0;
    window.channels.clear();
  }
}

/** Counts told to `a` and then `b`. */
function both(a: ClientMetrics, b: ClientMetrics): ClientMetrics {
  return {
    limits: (limits) => {
      a.limits(limits);
      b.limits(limits);
    },
    inFlight: (calls) => {
      a.inFlight(calls);
      b.inFlight(calls);
    },
    callStarted: (jobId) => {
      a.callStarted(jobId);
      b.callStarted(jobId);
    },
    sent: (channelId, observation) => {
      a.sent(channelId, observation);
      b.sent(channelId, observation);
    },
    quota: (channelId, quota) => {
      a.quota(channelId, quota);
      b.quota(channelId, quota);
    },
  };
}

/**
 * The answer-rate figures, published where a call's final status is recorded (the call-status and
 * contact-event functions): every attempt ended, and those answered (`completed`).
 */
export function callEndedMetrics(log: Logger) {
  return (ended: { readonly clientId: string; readonly status: FinalCallStatus }): void =>
    log.metrics(
      { CallsEnded: 1, CallsAnswered: ended.status === 'completed' ? 1 : 0 },
      { clientId: ended.clientId },
      { rollUp: true },
    );
}
