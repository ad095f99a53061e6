/**
 * A message task's delivery state as its channel's own events last moved it (SES's for email,
 * End User Messaging's for SMS), channel-neutral: each channel names its states and ranks them
 * (`EMAIL_DELIVERY_RANK`, `SMS_DELIVERY_RANK`); the store records the state, its rank and the
 * attempt it belongs to, and moves them forward only. Adapter: `shared/adapters/dynamo-delivery-outcomes.ts`.
 */

/** Which attempt of which task a send was. */
export interface DeliveryAttempt {
  readonly clientId: string;
  readonly jobId: string;
  readonly taskId: string;
  /** 1 for a task's first attempt. */
  readonly attempt: number;
}

/** What an event records on its task. */
export interface DeliveryStateChange<State extends string = string> extends DeliveryAttempt {
  readonly state: State;
  /** When the event happened (epoch ms). */
  readonly at: number;
  /** What the channel or the receiving side said (a bounce, a carrier's refusal …). */
  readonly reason?: string;
  /**
   * The event proves the attempt left the channel's service, so the task's `sentAttempt` becomes at
   * least `attempt` (the broker's in-doubt wait reads it).
   */
  readonly sent: boolean;
}

/**
 * - `recorded`: the task's delivery state moved to the event's.
 * - `stale`: the task records this state or a later one (a duplicate, or an event arriving late).
 * - `unknown-task`: no task of that client has that id (never one, or deleted after its retention).
 */
export type DeliveryRecordResult = 'recorded' | 'stale' | 'unknown-task';

/** Where a task's delivery state is kept. */
export interface DeliveryOutcomeStore<State extends string = string> {
  /**
   * Records `change` on its task when it supersedes what the task records (a later attempt, or a
   * higher rank of the same attempt), in one conditional write; when it does not but proves a later
   * attempt was sent than `sentAttempt` says, raises `sentAttempt` alone. Never lowers anything.
   */
  record(change: DeliveryStateChange<State>): Promise<DeliveryRecordResult>;
}
