/**
 * A customer's outcome webhook receiver, on the local cloud: verifies each POST's
 * `Switchboard-Signature` (HMAC-SHA256 of `t.body`, 5-minute tolerance) on the raw body, records the
 * events by id (duplicates counted, never recorded twice) with the newest sequence per task and job,
 * and can be told to fail: answer 5xx, process but lose the answer (the socket is cut after the
 * events are recorded), drop the connection without processing, answer late, or be down altogether
 * (`stop()` then `start()` on the same port).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { OutcomeDeliveryBody, OutcomeEvent } from '#shared/outcomes/events.ts';
import { OUTCOME_SIGNATURE_HEADER, verifyOutcomeSignature } from '#shared/outcomes/signature.ts';

/**
 * What the next requests suffer, in order of arrival; with `forEvent`, only a request delivering
 * that event (other senders' requests on the same receiver pass it by).
 */
export type ReceiverFault = (
  | { readonly kind: 'status'; readonly status: number }
  | { readonly kind: 'lose-response' }
  | { readonly kind: 'drop-connection' }
  | { readonly kind: 'latency'; readonly ms: number }
) & { readonly forEvent?: string };

export interface ReceivedEvent {
  readonly event: OutcomeEvent;
  /** How many deliveries carried it (1 = no duplicate). */
  readonly deliveries: number;
  /** Epoch ms of its first accepted delivery. */
  readonly receivedAt: number;
}

export interface OutcomeReceiverStats {
  readonly requests: number;
  readonly accepted: number;
  readonly badSignatures: number;
  readonly faults: number;
  readonly duplicates: number;
}

export class OutcomeReceiver {
  readonly #secret: string;
  readonly #events = new Map<string, { event: OutcomeEvent; deliveries: number; receivedAt: number }>();
  /** Subject (task `jobId/taskId` or job id) → the newest sequence seen. */
  readonly #newest = new Map<string, string>();
  readonly #faults: ReceiverFault[] = [];
  readonly #waiters = new Set<() => void>();
  #stats = { requests: 0, accepted: 0, badSignatures: 0, faults: 0, duplicates: 0 };
  #server: http.Server | undefined;
  #port = 0;

  constructor(options: { secret: string }) {
    this.#secret = options.secret;
  }

  /** Listens (again) on 127.0.0.1, on the port it had before if it had one. */
  async start(): Promise<void> {
    const server = http.createServer((req, res) => void this.#handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.#port, '127.0.0.1', resolve);
    });
    this.#port = (server.address() as AddressInfo).port;
    this.#server = server;
  }

  /** Stops listening and cuts every open connection (a receiver that went down). */
  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  get url(): string {
    return `http://127.0.0.1:${this.#port}/outcomes`;
  }

  /** The next requests fail this way, one fault per request. */
  inject(...faults: ReceiverFault[]): void {
    this.#faults.push(...faults);
  }

  stats(): OutcomeReceiverStats {
    return { ...this.#stats };
  }

  events(): ReceivedEvent[] {
    return [...this.#events.values()].map(({ event, deliveries, receivedAt }) => ({
      event,
      deliveries,
      receivedAt,
    }));
  }

  /** Resolves when `predicate` holds over the recorded events (checked at every accepted request). */
  async waitFor(predicate: (events: ReceivedEvent[]) => boolean, timeoutMs: number): Promise<void> {
    if (predicate(this.events())) return;
    await new Promise<void>((resolve, reject) => {
      const check = () => {
        if (!predicate(this.events())) return;
        clearTimeout(timer);
        this.#waiters.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(check);
        reject(
          new Error(`outcome receiver: condition not met in ${timeoutMs} ms (${this.#events.size} events)`),
        );
      }, timeoutMs);
      this.#waiters.add(check);
    });
  }

  async #handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks);
    this.#stats.requests++;
    const fault = this.#takeFault(raw);
    if (fault) this.#stats.faults++;
    if (fault?.kind === 'latency') await new Promise((r) => setTimeout(r, fault.ms));
    if (fault?.kind === 'drop-connection') return void req.socket.destroy();
    if (fault?.kind === 'status') return void res.writeHead(fault.status).end();
    try {
      verifyOutcomeSignature({
        header: req.headers[OUTCOME_SIGNATURE_HEADER.toLowerCase()] as string | undefined,
        rawBody: raw,
        secret: this.#secret,
        nowMs: Date.now(),
      });
    } catch {
      this.#stats.badSignatures++;
      return void res.writeHead(401).end();
    }
    this.#record(JSON.parse(raw.toString('utf8')) as OutcomeDeliveryBody);
    if (fault?.kind === 'lose-response') return void req.socket.destroy();
    res.writeHead(204).end();
  }

  /** The first injected fault this request suffers (one aimed at an event only if it carries it). */
  #takeFault(raw: Buffer): ReceiverFault | undefined {
    const at = this.#faults.findIndex((f) => f.forEvent === undefined || raw.includes(`"${f.forEvent}"`));
    return at < 0 ? undefined : this.#faults.splice(at, 1)[0];
  }

  #record(body: OutcomeDeliveryBody): void {
    this.#stats.accepted++;
    for (const event of body.events) {
      const seen = this.#events.get(event.id);
      if (seen) {
        seen.deliveries++;
        this.#stats.duplicates++;
        continue;
      }
      this.#events.set(event.id, { event, deliveries: 1, receivedAt: Date.now() });
      const subject =
        event.type === 'task.ended' ? `${event.data.jobId}/${event.data.taskId}` : event.data.jobId;
      const newest = this.#newest.get(subject);
      if (newest === undefined || event.sequence > newest) this.#newest.set(subject, event.sequence);
    }
    for (const waiter of [...this.#waiters]) waiter();
  }

  /** The newest sequence seen for a task (`jobId/taskId`) or a job. */
  newestSequence(subject: string): string | undefined {
    return this.#newest.get(subject);
  }
}

/** Starts a receiver verifying with `secret`. */
export async function startOutcomeReceiver(options: { secret: string }): Promise<OutcomeReceiver> {
  const receiver = new OutcomeReceiver(options);
  await receiver.start();
  return receiver;
}
