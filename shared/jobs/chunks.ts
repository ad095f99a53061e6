/**
 * Multicast work held per chunk (docs/multicast-chunks.md): the recipients of a message job whose
 * message is the same for everyone, up to {@link CHUNK_MEMBERS} of them, in one task-shaped item
 * instead of one task each. A chunk moves through the task lifecycle as one task does (pending, in
 * flight, retry-wait, an end) and is sent as one multicast under one retry key per attempt
 * (`chunkRetryKey`); a member that ends apart from the rest (opted out, suppressed, capped) is
 * written in the chunk's `except` map.
 *
 * Everything that reads tasks one recipient at a time (the report, the outcome webhooks, the
 * cancel sweep's counts) reads a chunk through {@link memberTasks}: one {@link Task} per member,
 * with the very task id the member would have had as a task of its own (`recipientTaskId`), so a
 * report or an outcome event does not show how the work was held.
 *
 * Members are stored packed: a LINE user id (`U` + 32 hex digits) in 16 bytes, its row in 4; 500
 * members take 10 KB, under a third of them written as strings.
 *
 * A job whose message differs per recipient (placeholders) is held in chunks too: each member's
 * name and variables ride along in `memberVariables` (JSON, in member order), and a claim sends
 * each member its own push under its own task's retry key — the chunk is one item to claim and to
 * end, not one request. Such a chunk is cut at {@link CHUNK_VARIABLE_BYTES} of variables as well as
 * at 500 members, so it stays well inside DynamoDB's 400 KB item.
 */
import { recipientTaskId } from '#shared/csv/duplicates.ts';
import { JobError } from './errors.ts';
import type { Task, TaskState } from './model.ts';

/** Most members a chunk holds: LINE's multicast limit (`MAX_MULTICAST_RECIPIENTS`). */
export const CHUNK_MEMBERS = 500;

export const CHUNK_ID_PREFIX = 'chunk-';
const LINE_USER_ID = /^U[0-9a-f]{32}$/;
const ID_BYTES = 16;
/** Most bytes of members' variables (UTF-8 JSON) one chunk holds: its item and index entry stay under 400 KB. */
export const CHUNK_VARIABLE_BYTES = 200_000;
const ROW_BYTES = 4;

/** A member's end when it differs from its chunk's: it left the chunk's work early. */
export interface MemberEnd {
  readonly state: Extract<TaskState, 'completed' | 'failed' | 'cancelled' | 'expired'>;
  readonly lastResult?: string;
  readonly reason?: string;
  /** Attempts it had started when it ended (the chunk's attempts go on). */
  readonly attempts: number;
  readonly updatedAt: number;
}

/**
 * A member moved out of its chunk into a task of its own (a chunk *spilled* for contact limits:
 * `dynamo-chunk-spill.ts`): the task speaks for it from then on, the chunk no longer does.
 */
export interface MemberMoved {
  readonly moved: true;
}

/** What a chunk says of a member apart from its own state: its own end, or moved out. */
export type MemberApart = MemberEnd | MemberMoved;

export const isMoved = (apart: MemberApart): apart is MemberMoved => 'moved' in apart && apart.moved;

/** The record of a chunk: a task's, without the per-recipient fields, plus its packed members. */
export interface Chunk extends Omit<Task, 'taskId' | 'row' | 'recipient' | 'name' | 'variables'> {
  /** `chunk-{first row}`: the first row read on the ingest page it came from ({@link chunkTaskId}). */
  readonly taskId: string;
  /** The members' LINE user ids, 16 bytes each, in row order. */
  readonly members: Uint8Array;
  /** The members' rows, 4 bytes each (big-endian), in the same order. */
  readonly rows: Uint8Array;
  /** Members that ended apart from the chunk or moved out of it, by their index in `members`. */
  readonly except?: Readonly<Record<string, MemberApart>>;
  /** A personalised message's chunk: each member's {@link MemberVariables}, in member order, as JSON. */
  readonly memberVariables?: string;
}

/** What a member of a personalised message's chunk fills the message's placeholders with. */
export interface MemberVariables {
  readonly name?: string;
  readonly variables?: Readonly<Record<string, string>>;
}

/** One member of a chunk. */
export interface ChunkMember extends MemberVariables {
  readonly index: number;
  readonly recipient: string;
  readonly row: number;
}

export class ChunkMemberError extends JobError {}

/**
 * The id of the chunk an ingest page's recipients are held in: named by the first row *read* on
 * the page (not the first accepted), so a page written again after a crash, when new opt-outs may
 * drop other rows, writes the same chunk and never one that overlaps it.
 */
export function chunkTaskId(firstRowRead: number): string {
  if (!Number.isSafeInteger(firstRowRead) || firstRowRead < 1)
    throw new RangeError(`a chunk is named by a row ≥ 1, got ${firstRowRead}`);
  return `${CHUNK_ID_PREFIX}${String(firstRowRead).padStart(10, '0')}`;
}

/** True for a recipient a chunk can hold: a LINE user id (`U` + 32 hex digits). */
export const isChunkable = (recipient: string): boolean => LINE_USER_ID.test(recipient);

/** True for a chunk's task id (a task of one recipient has a UUID: `recipientTaskId`). */
export function isChunkTaskId(taskId: string): boolean {
  return taskId.startsWith(CHUNK_ID_PREFIX);
}

/** True for a stored item or image that is a chunk. */
export function isChunk(item: { readonly taskId?: unknown }): boolean {
  return typeof item.taskId === 'string' && isChunkTaskId(item.taskId);
}

/**
 * Members packed for a chunk item, with their variables when `personalised`; throws
 * {@link ChunkMemberError} for a recipient that is not a LINE user id.
 */
export function packMembers(
  members: readonly Omit<ChunkMember, 'index'>[],
  personalised = false,
): Pick<Chunk, 'members' | 'rows' | 'memberVariables'> {
  if (members.length < 1 || members.length > CHUNK_MEMBERS)
    throw new ChunkMemberError(`a chunk holds 1 to ${CHUNK_MEMBERS} members, got ${members.length}`);
  const ids = new Uint8Array(members.length * ID_BYTES);
  const rows = new Uint8Array(members.length * ROW_BYTES);
  const rowView = new DataView(rows.buffer);
  members.forEach(({ recipient, row }, i) => {
    if (!LINE_USER_ID.test(recipient))
      throw new ChunkMemberError(`a chunk's member is a LINE user id (U + 32 hex digits), got ${recipient}`);
    if (!Number.isInteger(row) || row < 1 || row > 0xffff_ffff)
      throw new ChunkMemberError(`a member's row is 1 to ${0xffff_ffff}, got ${row}`);
    ids.set(Buffer.from(recipient.slice(1), 'hex'), i * ID_BYTES);
    rowView.setUint32(i * ROW_BYTES, row);
  });
  if (!personalised) return { members: ids, rows };
  return { members: ids, rows, memberVariables: JSON.stringify(members.map(variablesOfMember)) };
}

/** A member's name and variables as a chunk stores them (absent ones left out). */
function variablesOfMember(member: MemberVariables): MemberVariables {
  const hasVariables = member.variables !== undefined && Object.keys(member.variables).length > 0;
  return {
    ...(member.name === undefined ? {} : { name: member.name }),
    ...(hasVariables ? { variables: member.variables } : {}),
  };
}

/** The UTF-8 bytes a member's variables take in a chunk. */
export function memberVariableBytes(member: MemberVariables): number {
  return Buffer.byteLength(JSON.stringify(variablesOfMember(member)));
}

/** The chunk's members, in order; throws {@link ChunkMemberError} when its packed fields disagree. */
export function chunkMembers(chunk: Pick<Chunk, 'members' | 'rows' | 'memberVariables'>): ChunkMember[] {
  const ids = chunk.members;
  const rows = chunk.rows;
  const count = ids.length / ID_BYTES;
  if (!Number.isInteger(count) || rows.length !== count * ROW_BYTES)
    throw new ChunkMemberError(`a chunk's members (${ids.length} bytes) and rows (${rows.length}) disagree`);
  const variables = chunk.memberVariables === undefined ? undefined : parseVariables(chunk.memberVariables);
  if (variables !== undefined && variables.length !== count)
    throw new ChunkMemberError(
      `a chunk's members (${count}) and their variables (${variables.length}) disagree`,
    );
  const rowView = new DataView(rows.buffer, rows.byteOffset, rows.byteLength);
  const out: ChunkMember[] = [];
  for (let i = 0; i < count; i++) {
    const recipient = `U${Buffer.from(ids.buffer, ids.byteOffset + i * ID_BYTES, ID_BYTES).toString('hex')}`;
    out.push({ index: i, recipient, row: rowView.getUint32(i * ROW_BYTES), ...variables?.[i] });
  }
  return out;
}

function parseVariables(json: string): MemberVariables[] {
  const parsed: unknown = JSON.parse(json);
  if (!Array.isArray(parsed)) throw new ChunkMemberError("a chunk's member variables are not a list");
  return parsed as MemberVariables[];
}

/** A member's template variables: its own columns, and `name` for the list's name column (as a task's). */
export function memberTemplateVariables(member: MemberVariables): Record<string, string> {
  const variables = { ...(member.variables ?? {}) };
  return member.name !== undefined && !Object.hasOwn(variables, 'name')
    ? { name: member.name, ...variables }
    : variables;
}

/**
 * Each member as the task it stands for: its own task id, row and recipient; the state, attempts
 * and result of its end in `except`, else the chunk's. A member moved out is left to its task.
 */
export function memberTasks(chunk: Chunk): Task[] {
  const {
    members: _m,
    rows: _r,
    except,
    taskId: _t,
    memberCount: _c,
    memberVariables: _v,
    ...shared
  } = chunk as Chunk & {
    memberCount?: number;
  };
  return chunkMembers(chunk).flatMap(({ index, recipient, row, name, variables }) => {
    const own = except?.[String(index)];
    if (own && isMoved(own)) return [];
    const base = {
      ...shared,
      taskId: recipientTaskId(chunk.jobId, recipient),
      row,
      recipient,
      ...(name === undefined ? {} : { name }),
      variables: { ...(variables ?? {}) },
    };
    if (!own) return [base];
    const { lastResult: _l, reason: _reason, ...rest } = base;
    return [
      {
        ...rest,
        state: own.state,
        attempts: own.attempts,
        updatedAt: own.updatedAt,
        ...(own.lastResult === undefined ? {} : { lastResult: own.lastResult }),
        ...(own.reason === undefined ? {} : { reason: own.reason }),
      },
    ];
  });
}

/** The members the chunk's own state speaks for (neither ended apart nor moved out), in order. */
export function membersInState(chunk: Pick<Chunk, 'members' | 'rows' | 'except'>): ChunkMember[] {
  return chunkMembers(chunk).filter(({ index }) => chunk.except?.[String(index)] === undefined);
}

/** The ends of the members that ended apart (not those moved out). */
export function membersEndedApart(chunk: Pick<Chunk, 'except'>): MemberEnd[] {
  return Object.values(chunk.except ?? {}).filter((apart): apart is MemberEnd => !isMoved(apart));
}

/** How many members a chunk holds (its `memberCount`, read with the index entry to size a claim page). */
export const memberCountOf = (chunk: Pick<Chunk, 'members'>): number => chunk.members.length / ID_BYTES;

/** How many of the chunk's members its own state speaks for (those not ended apart). */
export function membersInChunkState(chunk: Pick<Chunk, 'members' | 'except'>): number {
  return chunk.members.length / ID_BYTES - Object.keys(chunk.except ?? {}).length;
}

/**
 * An ingest page's accepted recipients split into chunks of at most {@link CHUNK_MEMBERS} (and,
 * `personalised`, {@link CHUNK_VARIABLE_BYTES} of their variables), in row order: the first named by the page's first row read, each next one by its own first member's row
 * (rows only grow through a file, so names never collide between pages).
 */
export function pageChunks<M extends Omit<ChunkMember, 'index'>>(
  firstRowRead: number,
  members: readonly M[],
  personalised = false,
): { readonly taskId: string; readonly members: readonly M[] }[] {
  const out: { taskId: string; members: readonly M[] }[] = [];
  let part: M[] = [];
  let bytes = 0;
  const close = () => {
    if (part.length === 0) return;
    out.push({ taskId: chunkTaskId(out.length === 0 ? firstRowRead : part[0]!.row), members: part });
    part = [];
    bytes = 0;
  };
  for (const member of members) {
    const size = personalised ? memberVariableBytes(member) : 0;
    if (part.length === CHUNK_MEMBERS || (part.length > 0 && bytes + size > CHUNK_VARIABLE_BYTES)) close();
    part.push(member);
    bytes += size;
  }
  close();
  return out;
}
