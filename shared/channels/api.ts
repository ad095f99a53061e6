/**
 * The operator API's channels: a client's LINE channels listed, shown, created or replaced, and
 * their secret rotated — through the HTTP API (SigV4 for operators, the console's JWT for its
 * users), as `npm run channel` does against the table. Nothing it answers holds a secret or a
 * token, not even masked: a view says only that they are set, and until when a retiring secret is
 * still accepted.
 *
 * A channel belongs to one client. A client's route never reads, replaces or rotates another
 * client's channel: the store writes only where the item is new or still the caller's, unchanged
 * since it was read (so a rotation racing a replace cannot drop either).
 */
import type { Channel } from './channel.ts';
import { channelFromInput, InvalidChannelError, rotateSecret } from './channel-input.ts';
import { ChannelError } from './errors.ts';

/** A channel as an operator sees it: everything but its secrets and token. */
export interface ChannelView {
  readonly channelId: string;
  readonly clientId: string;
  readonly autoAnswer: Channel['autoAnswer'];
  readonly greeting?: string;
  readonly rules: Channel['rules'];
  readonly fallback?: string;
  /** ISO 8601. */
  readonly updatedAt: string;
  readonly secret: {
    /** Always true: a channel cannot exist without one. */
    readonly set: true;
    /** Until when the previous secret is still accepted (ISO 8601), during a rotation. */
    readonly previousAcceptedUntil?: string;
  };
  readonly accessToken: { readonly set: true };
}

/** The channels store as the API uses it (DynamoDB: `shared/adapters/dynamo-channels.ts`). */
export interface ChannelAdminStore {
  get(channelId: string): Promise<Channel | undefined>;
  /** The client's channels, by the channels table's `byClient` index. */
  listByClient(clientId: string): Promise<Channel[]>;
  /**
   * Writes `channel` if no channel of its id exists (`seenUpdatedAt` undefined), or if the stored
   * one is still of `channel.clientId` and unchanged since `seenUpdatedAt`. False when not written.
   */
  putIfUnchanged(channel: Channel, seenUpdatedAt: number | undefined): Promise<boolean>;
}

export class ChannelNotFoundError extends ChannelError {
  constructor(clientId: string, channelId: string) {
    super(`client ${clientId} has no channel ${channelId}`);
  }
}

/** A write refused: the channel is another client's, or changed since it was read. */
export class ChannelConflictError extends ChannelError {}

const HOUR_MS = 3600_000;
/** Longest grace a rotated-out secret keeps verifying webhooks. */
const MAX_GRACE_HOURS = 24 * 7;

export function channelView(channel: Channel, now: number): ChannelView {
  const retiring = channel.secrets
    .filter((s) => s.retiresAt !== undefined && s.retiresAt > now)
    .map((s) => s.retiresAt!);
  return {
    channelId: channel.channelId,
    clientId: channel.clientId,
    autoAnswer: channel.autoAnswer,
    ...(channel.greeting !== undefined ? { greeting: channel.greeting } : {}),
    rules: channel.rules,
    ...(channel.fallback !== undefined ? { fallback: channel.fallback } : {}),
    updatedAt: new Date(channel.updatedAt).toISOString(),
    secret: {
      set: true,
      ...(retiring.length > 0
        ? { previousAcceptedUntil: new Date(Math.max(...retiring)).toISOString() }
        : {}),
    },
    accessToken: { set: true },
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The body's ids must be the path's, when the body names them at all. */
function checkIds(body: Record<string, unknown>, clientId: string, channelId: string): void {
  const fieldErrors: Record<string, string[]> = {};
  if (body.channelId !== undefined && body.channelId !== channelId)
    fieldErrors.channelId = [`must be the channel of the path (${channelId}) or left out`];
  if (body.clientId !== undefined && body.clientId !== clientId)
    fieldErrors.clientId = [`must be the client of the path (${clientId}) or left out`];
  if (Object.keys(fieldErrors).length > 0) throw new InvalidChannelError(fieldErrors);
}

export class ChannelsApi {
  readonly #store: ChannelAdminStore;
  readonly #now: () => number;

  constructor(store: ChannelAdminStore, now: () => number) {
    this.#store = store;
    this.#now = now;
  }

  async list(clientId: string): Promise<{ channels: ChannelView[] }> {
    const channels = await this.#store.listByClient(clientId);
    const now = this.#now();
    channels.sort((a, b) => a.channelId.localeCompare(b.channelId));
    return { channels: channels.map((c) => channelView(c, now)) };
  }

  async get(clientId: string, channelId: string): Promise<ChannelView> {
    return channelView(await this.#own(clientId, channelId), this.#now());
  }

  /**
   * Creates or replaces the channel. On a replace, a secret or token left out of the body is kept
   * (with a rotation's retiring secret); one given replaces every previous secret, as
   * `npm run channel -- put` does. Rotate through {@link rotateSecret} to keep the old one a while.
   */
  async put(
    clientId: string,
    channelId: string,
    body: unknown,
  ): Promise<{ channel: ChannelView; created: boolean }> {
    if (!isRecord(body)) throw new InvalidChannelError({ '(body)': ['must be a JSON object'] });
    checkIds(body, clientId, channelId);
    const existing = await this.#store.get(channelId);
    if (existing && existing.clientId !== clientId) throw this.#elsewhere(channelId);
    const now = this.#now();
    const current = existing?.secrets.find((s) => s.retiresAt === undefined) ?? existing?.secrets[0];
    // A GET's answer may be PUT back: its read-only parts (`updatedAt`, `secret`, `accessToken: {set}`)
    // say nothing to change; anything else unknown is refused by the schema.
    const { updatedAt: _updatedAt, secret: _secret, ...input } = body;
    const keepToken = isRecord(body.accessToken) && Object.keys(body.accessToken).join() === 'set';
    const parsed = channelFromInput(
      {
        ...input,
        channelId,
        clientId,
        channelSecret: body.channelSecret ?? current?.value,
        accessToken: (keepToken ? undefined : body.accessToken) ?? existing?.accessToken,
      },
      now,
    );
    const channel: Channel =
      existing && body.channelSecret === undefined ? { ...parsed, secrets: existing.secrets } : parsed;
    const written = await this.#write(channel, existing);
    return { channel: channelView(written, now), created: existing === undefined };
  }

  /** Makes `channelSecret` the secret; the previous one verifies webhooks for `graceHours` more (default 24). */
  async rotateSecret(clientId: string, channelId: string, body: unknown): Promise<ChannelView> {
    if (!isRecord(body)) throw new InvalidChannelError({ '(body)': ['must be a JSON object'] });
    const { channelSecret, graceHours = 24, ...unknown } = body;
    // No prototype: a field named `__proto__` is reported like any other.
    const fieldErrors = Object.create(null) as Record<string, string[]>;
    for (const key of Object.keys(unknown)) fieldErrors[key] = ['is not a known field'];
    if (typeof channelSecret !== 'string' || channelSecret.length === 0)
      fieldErrors.channelSecret = ['required: the new channel secret'];
    if (
      typeof graceHours !== 'number' ||
      !Number.isFinite(graceHours) ||
      graceHours < 0 ||
      graceHours > MAX_GRACE_HOURS
    )
      fieldErrors.graceHours = [`must be a number of hours from 0 to ${MAX_GRACE_HOURS}`];
    if (Object.keys(fieldErrors).length > 0) throw new InvalidChannelError(fieldErrors);
    const existing = await this.#own(clientId, channelId);
    const now = this.#now();
    const rotated = rotateSecret(existing, channelSecret as string, now, (graceHours as number) * HOUR_MS);
    return channelView(await this.#write(rotated, existing), now);
  }

  async #own(clientId: string, channelId: string): Promise<Channel> {
    const channel = await this.#store.get(channelId);
    // Another client's channel is not found: a client learns nothing of the others' channels.
    if (!channel || channel.clientId !== clientId) throw new ChannelNotFoundError(clientId, channelId);
    return channel;
  }

  /** Writes `channel` over `seen`, stamped later than it (the store's check compares stamps). */
  async #write(channel: Channel, seen: Channel | undefined): Promise<Channel> {
    const stamped =
      seen && channel.updatedAt <= seen.updatedAt ? { ...channel, updatedAt: seen.updatedAt + 1 } : channel;
    if (await this.#store.putIfUnchanged(stamped, seen?.updatedAt)) return stamped;
    const now = await this.#store.get(channel.channelId);
    if (now && now.clientId !== channel.clientId) throw this.#elsewhere(channel.channelId);
    throw new ChannelConflictError(
      `channel ${channel.channelId} changed while this request was being answered: read it again and retry`,
    );
  }

  #elsewhere(channelId: string): ChannelConflictError {
    return new ChannelConflictError(`channel ${channelId} is registered to another client`);
  }
}
