/** What the claim and report sides of one message session share: the lease they work under and their state. */
import { ClaimedChunks } from './dynamo-message-chunks.ts';

/** The lease a session claims under; `token()` is undefined once it is lost. */
export interface MessageClaimLease {
  readonly clientId: string;
  readonly owner: string;
  token(): number | undefined;
}

/** What a session's parts share: the tasks it holds, the jobs it has claimed from, the fence. */
export class SessionState {
  /** Tasks claimed in this session and not yet written back. */
  readonly held = new Set<string>();
  /** When each held task's first claim started (`claimKey`), for its outcome to record. */
  readonly startedAt = new Map<string, number>();
  readonly jobsSeen = new Set<string>();
  /** Chunks claimed and not yet written back (`dynamo-message-chunks.ts`). */
  readonly chunks = new ClaimedChunks();
  fenced = false;
  readonly written = { delivered: 0, failed: 0, skipped: 0, released: 0 };
}
