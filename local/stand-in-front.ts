/**
 * What the SES and SMS stand-ins' HTTP fronts (`ses-emulator.ts`, `sms-emulator.ts`) do alike, each
 * in its service's words: check a request's SigV4 signature, and make a send with its faults.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SendFault, SesFaults } from './ses/faults.ts';
import { SigV4Error, type SigV4Result, verifySigV4 } from './sigv4.ts';
import type { FrontError } from './telephony-sandbox/http-front.ts';

/** A service's words: its error, its 200, and the error type and message of each refused send. */
export interface ServiceWire<E extends string> {
  readonly error: (type: E, message: string) => FrontError;
  readonly answer: (res: ServerResponse, body: unknown) => void;
  readonly refusals: Readonly<Record<Exclude<SendFault, 'answer-lost'>, readonly [type: E, message: string]>>;
}

/**
 * A send, with its faults: refused before anything is done (throttled, 500, 503), or done and its
 * answer lost (the socket destroyed: the SDK sees a network error, never a status).
 */
export function sendWithFaults<E extends string>(
  faults: SesFaults,
  wire: ServiceWire<E>,
  exchange: { readonly req: IncomingMessage; readonly res: ServerResponse },
  operation: () => unknown,
): void {
  const refusal = faults.drawRefusal();
  if (refusal !== undefined) throw wire.error(...wire.refusals[refusal]);
  const result = operation();
  if (faults.drawAnswerLoss()) {
    exchange.req.socket.destroy();
    return;
  }
  wire.answer(exchange.res, result);
}

/** The request's signature checked for `service` (header only), a failure refused as `refuse` says. */
export function checkSignature(
  req: IncomingMessage,
  body: Buffer,
  options: {
    readonly secrets: Readonly<Record<string, string>>;
    readonly region: string;
    readonly service: string;
  },
  refuse: (error: SigV4Error) => FrontError,
): SigV4Result {
  try {
    return verifySigV4(
      { method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers },
      { ...options, body, allowQuery: false },
    );
  } catch (error) {
    if (error instanceof SigV4Error) throw refuse(error);
    throw error;
  }
}
