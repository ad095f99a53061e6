/**
 * LINE's own check of a job's message, before the job's first send: its validation endpoint
 * (`/v2/bot/message/validate/push`, or `/multicast` for a shared message) asked once per job with
 * the messages of the job's first unit (rendered for its first recipient), the verdict remembered
 * for the job's other units. The senders of the job's units wait for that one answer, so none is
 * sent before it.
 *
 * - refused (LINE's 400): every unit of the job fails unsent with LINE's reason, and the job is
 *   told refused once (`onRefused`: the broker records the reason, and the job ends `failed`);
 * - unknown (5xx, 429, a timeout, no connection): not a reason to hold a campaign back: logged,
 *   and the job is sent as before (LINE still refuses each request it would refuse).
 */
import type { MessageVerdict, OutgoingMessage } from '#shared/line/messaging-client.ts';
import type { Logger } from '#shared/log.ts';
import type { ValidatePort } from './ports.ts';

/** How a failed unit's tasks say LINE refused the job's message. */
export const LINE_REFUSED_PREFIX = 'LINE refused the message: ';

export interface MessageCheckDeps {
  readonly validate: ValidatePort;
  /** Told once per job that LINE refused its message, with the reason the tasks carry. Must not throw. */
  readonly onRefused?: (jobId: string, reason: string) => void;
  readonly log?: Logger;
}

/** Asks LINE once per job whether it takes the job's message; make one per broker (or lease). */
export class MessageCheck {
  readonly #deps: MessageCheckDeps;
  readonly #verdicts = new Map<string, Promise<MessageVerdict>>();

  constructor(deps: MessageCheckDeps) {
    this.#deps = deps;
  }

  /**
   * Why the job's units may not be sent (LINE's reason, prefixed {@link LINE_REFUSED_PREFIX}), or
   * undefined when they may. The first call for a job asks LINE with `messages`; later calls for
   * it wait for that answer.
   */
  async refusal(
    jobId: string,
    endpoint: 'push' | 'multicast',
    messages: readonly OutgoingMessage[],
  ): Promise<string | undefined> {
    let verdict = this.#verdicts.get(jobId);
    if (verdict === undefined) {
      verdict = this.#ask(jobId, endpoint, messages);
      this.#verdicts.set(jobId, verdict);
    }
    const answer = await verdict;
    return answer.kind === 'refused' ? `${LINE_REFUSED_PREFIX}${answer.reason}` : undefined;
  }

  async #ask(
    jobId: string,
    endpoint: 'push' | 'multicast',
    messages: readonly OutgoingMessage[],
  ): Promise<MessageVerdict> {
    const { validate, onRefused, log } = this.#deps;
    const verdict = await validate(endpoint, messages).catch(
      (error: unknown): MessageVerdict => ({ kind: 'unknown', message: String(error) }),
    );
    if (verdict.kind === 'refused') {
      log?.warn('LINE refused a job’s message; its tasks fail unsent', { jobId, reason: verdict.reason });
      onRefused?.(jobId, `${LINE_REFUSED_PREFIX}${verdict.reason}`);
    } else if (verdict.kind === 'unknown') {
      log?.warn('LINE did not validate a job’s message; sending it as before', {
        jobId,
        message: verdict.message,
      });
    }
    return verdict;
  }
}
