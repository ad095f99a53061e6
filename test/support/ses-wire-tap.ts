/**
 * A tap on the wire between SES's clients and the SES v2 stand-in (`local/ses-emulator.ts`), for
 * drills that must know what a sender saw: every request is forwarded unchanged (the SigV4
 * signature names the tap's host, and the stand-in checks it against the forwarded `host` header
 * as it is), and each send is recorded with its recipients and what came back: an answer and its
 * status, or none at all (the stand-in accepted the send and dropped the connection, its
 * `answer-lost` fault). Every request goes to the stand-in on a connection of its own, so a dropped
 * connection is always the stand-in's doing, never a reused socket the stand-in had closed.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One SendEmail or SendBulkEmail, as the tap saw it. */
export interface TappedSend {
  readonly operation: 'SendEmail' | 'SendBulkEmail';
  /** Every To address of the request, in its order (a bulk send's entries one after another). */
  readonly recipients: readonly string[];
  /** An HTTP status came back; or none did (`lost`). */
  readonly outcome: { readonly answered: true; readonly status: number } | { readonly answered: false };
}

const SEND_PATHS: Readonly<Record<string, TappedSend['operation']>> = {
  '/v2/email/outbound-emails': 'SendEmail',
  '/v2/email/outbound-bulk-emails': 'SendBulkEmail',
};

interface Destination {
  readonly ToAddresses?: readonly string[];
}

/** The To addresses a send's JSON body names. */
function recipientsOf(operation: TappedSend['operation'], body: Buffer): string[] {
  try {
    const input = JSON.parse(body.toString('utf8')) as {
      Destination?: Destination;
      BulkEmailEntries?: readonly { Destination?: Destination }[];
    };
    if (operation === 'SendEmail') return [...(input.Destination?.ToAddresses ?? [])];
    return (input.BulkEmailEntries ?? []).flatMap((e) => e.Destination?.ToAddresses ?? []);
  } catch {
    return [];
  }
}

async function readAll(stream: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export class SesWireTap {
  /** Point the SES client's endpoint here instead of at the stand-in. */
  readonly url: string;
  readonly #target: URL;
  readonly #server: Server;
  readonly #sends: TappedSend[] = [];

  private constructor(target: string, server: Server) {
    this.#target = new URL(target);
    this.#server = server;
    const { port } = server.address() as AddressInfo;
    this.url = `http://127.0.0.1:${port}`;
  }

  /** Starts a tap on 127.0.0.1 (a free port) in front of `target` (the stand-in's `url`). */
  static async start(target: string): Promise<SesWireTap> {
    let tap: SesWireTap | undefined;
    const server = createServer((req, res) => {
      void tap!.#forward(req, res);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    tap = new SesWireTap(target, server);
    return tap;
  }

  /** Every send so far, in the order their outcomes came. */
  sends(): readonly TappedSend[] {
    return this.#sends;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // A sender killed while writing its request: nothing reaches the stand-in.
    const body = await readAll(req).catch(() => undefined);
    if (body === undefined) return;
    const path = new URL(req.url ?? '/', 'http://tap').pathname;
    const operation = req.method === 'POST' ? SEND_PATHS[path] : undefined;
    const upstream = request(new URL(req.url ?? '/', this.#target), {
      method: req.method,
      headers: req.headers,
      agent: false,
    });
    let answered = false;
    upstream.on('response', (answer) => {
      answered = true;
      void readAll(answer).then((answerBody) => {
        if (operation)
          this.#sends.push({
            operation,
            recipients: recipientsOf(operation, body),
            outcome: { answered: true, status: answer.statusCode ?? 0 },
          });
        const headers = { ...answer.headers, 'content-length': String(answerBody.length) };
        delete headers['transfer-encoding'];
        res.writeHead(answer.statusCode ?? 502, headers);
        res.end(answerBody);
      });
    });
    // No answer: the sender sees what the stand-in did, a connection dropped without a status.
    upstream.on('error', () => {
      if (answered) return;
      if (operation)
        this.#sends.push({
          operation,
          recipients: recipientsOf(operation, body),
          outcome: { answered: false },
        });
      req.socket.destroy();
    });
    upstream.end(body);
  }
}
