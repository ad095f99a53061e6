/**
 * LINE's rate limits for the endpoints Switchboard sends through, per channel and per endpoint
 * (each endpoint has its own allowance: pushes do not use up the multicast one, nor the reverse).
 *
 * From the Messaging API reference, "Rate limits"
 * (https://developers.line.biz/en/reference/messaging-api/#rate-limits): "Send multicast message"
 * 200 requests per second; "Send narrowcast message" and "Send broadcast message" 60 requests per
 * hour; every endpoint the table does not list ("Other API endpoints"), push and reply among them,
 * 2,000 requests per second. Beyond them LINE answers 429 Too Many Requests.
 */
import type { SendEndpoint } from './messaging-client.ts';

/** Requests per second each send endpoint takes from one channel. */
export type EndpointRates = Readonly<Record<SendEndpoint, number>>;

/** LINE's table, for the endpoints Switchboard uses. */
export const LINE_RATE_LIMITS: EndpointRates = {
  push: 2_000,
  multicast: 200,
  reply: 2_000,
};
