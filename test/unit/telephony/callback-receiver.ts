/** A stand-in for Switchboard's callback route: verifies each callback and keeps what it received. */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CALLBACK_SIGNATURE_HEADER } from '#shared/telephony/callback-signature.ts';
import type { CallStatusEvent } from '#shared/telephony/port.ts';
import { readSignedCallStatusEvent } from '#shared/telephony/status-event.ts';

export interface CallbackReceiver {
  readonly url: string;
  /** Verified events, in arrival order (duplicates included). */
  readonly events: CallStatusEvent[];
  /** Posts that failed verification. */
  readonly rejected: string[];
  /** Status to answer with from now on (default 204). */
  answerWith(status: number): void;
  stop(): Promise<void>;
}

export async function startCallbackReceiver(
  secret: string,
  clock: { now(): number },
): Promise<CallbackReceiver> {
  const events: CallStatusEvent[] = [];
  const rejected: string[] = [];
  let status = 204;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      try {
        const event = readSignedCallStatusEvent({
          header: req.headers[CALLBACK_SIGNATURE_HEADER.toLowerCase()] as string | undefined,
          rawBody: Buffer.concat(chunks),
          secrets: secret,
          clock,
        });
        if (status < 300) events.push(event);
        res.writeHead(status).end();
      } catch (error) {
        rejected.push((error as Error).name);
        res.writeHead(401).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/telephony/callbacks`,
    events,
    rejected,
    answerWith(next) {
      status = next;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
