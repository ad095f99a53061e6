/** The LINE sandbox's answers, in LINE's shapes: a status, a JSON body, and sometimes headers. */
import { MONTHLY_LIMIT_MESSAGE } from '#shared/line/messaging-client.ts';

export interface Answer {
  readonly status: number;
  readonly body: unknown;
  readonly headers?: Record<string, string>;
}

const RATE_LIMIT_MESSAGE = 'The API rate limit has been exceeded. Try again later.';

/** 429: the per-second rate limit. */
export function rateLimited(): Answer {
  return { status: 429, body: { message: RATE_LIMIT_MESSAGE } };
}

/** 429: the channel's monthly message quota is used up. */
export function monthlyLimitReached(): Answer {
  return { status: 429, body: { message: MONTHLY_LIMIT_MESSAGE } };
}

/** 500: nothing delivered. */
export function internalError(): Answer {
  return { status: 500, body: { message: 'Internal server error' } };
}

/** 400 with a bare message. */
export function badRequest(message: string): Answer {
  return { status: 400, body: { message } };
}
