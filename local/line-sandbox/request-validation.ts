/**
 * Checks Messaging API request bodies the way LINE answers them: a 400 with `{ message, details }`,
 * where each detail names the offending `property` (e.g. `messages[0].text`), and each message
 * object is checked by its type's rules (message-rules.ts). A `to` that is not a LINE id is refused
 * the way LINE refuses it, before anything else: `The property, 'to', in the request body is invalid`.
 */
import { z } from 'zod';
import type { SendEndpoint } from '#shared/line/messaging-client.ts';
import { type LineErrorDetail, messageProblems } from './message-rules.ts';

/** Most messages per request (reply, push, multicast, and the validation endpoints). */
export const MAX_MESSAGES = 5;
/** Most recipients of one multicast. */
export const MAX_MULTICAST_RECIPIENTS = 500;

export interface LineErrorBody {
  readonly message: string;
  readonly details?: readonly LineErrorDetail[];
}

/** A push goes to a user, a group or a room: `U`, `C` or `R` and 32 lowercase hex digits. */
const PUSH_TARGET = /^[UCR][0-9a-f]{32}$/;
/** A multicast goes to users only. */
const USER_ID = /^U[0-9a-f]{32}$/;

const messagesSchema = z
  .array(z.unknown(), { error: 'Must be an array' })
  .min(1, `Size must be between 1 and ${MAX_MESSAGES}`)
  .max(MAX_MESSAGES, `Size must be between 1 and ${MAX_MESSAGES}`);

const common = {
  messages: messagesSchema,
  notificationDisabled: z.boolean({ error: 'Must be a boolean' }).optional(),
};

const bodySchemas = {
  reply: z.looseObject({
    replyToken: z.string({ error: 'May not be empty' }).min(1, 'May not be empty'),
    ...common,
  }),
  push: z.looseObject({ to: z.string({ error: 'May not be empty' }).min(1, 'May not be empty'), ...common }),
  multicast: z.looseObject({
    to: z
      .array(z.string().min(1, 'May not be empty'), { error: 'Must be an array' })
      .min(1, `Size must be between 1 and ${MAX_MULTICAST_RECIPIENTS}`)
      .max(MAX_MULTICAST_RECIPIENTS, `Size must be between 1 and ${MAX_MULTICAST_RECIPIENTS}`),
    ...common,
  }),
  validate: z.looseObject({ messages: messagesSchema }),
} as const;

/** A body the sandbox checks: a send endpoint's, or (`validate`) a validation endpoint's. */
export type CheckedEndpoint = SendEndpoint | 'validate';

export type ReplyBody = z.infer<(typeof bodySchemas)['reply']>;
export type PushBody = z.infer<(typeof bodySchemas)['push']>;
export type MulticastBody = z.infer<(typeof bodySchemas)['multicast']>;
export type ValidateBody = z.infer<(typeof bodySchemas)['validate']>;
export type SendBody = ReplyBody | PushBody | MulticastBody | ValidateBody;

export type Checked<T> =
  | { readonly ok: true; readonly body: T }
  | { readonly ok: false; readonly error: LineErrorBody };

/** Parses and checks a request body; on failure, the error body LINE would answer with. */
export function checkSendBody(endpoint: CheckedEndpoint, text: string): Checked<SendBody> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { ok: false, error: { message: 'The request body could not be parsed as JSON' } };
  }
  const result = bodySchemas[endpoint].safeParse(json);
  const details: LineErrorDetail[] = result.success
    ? []
    : result.error.issues.map((issue) => ({ message: issue.message, property: formatProperty(issue.path) }));
  if (result.success && !targetsAreIds(endpoint, result.data)) {
    return {
      ok: false,
      error: { message: "The property, 'to', in the request body is invalid (line: -, column: -)" },
    };
  }
  const messages = (json as { messages?: unknown } | null)?.messages;
  if (Array.isArray(messages) && messages.length <= MAX_MESSAGES) {
    messages.forEach((message, index) => {
      details.push(...messageProblems(message, index));
    });
  }
  if (result.success && details.length === 0) return { ok: true, body: result.data };
  return { ok: false, error: { message: `The request body has ${details.length} error(s)`, details } };
}

/** Whether a push's or multicast's `to` names LINE ids (other endpoints have no `to`). */
function targetsAreIds(endpoint: CheckedEndpoint, body: SendBody): boolean {
  if (endpoint === 'push') return PUSH_TARGET.test((body as PushBody).to);
  if (endpoint === 'multicast') return (body as MulticastBody).to.every((to) => USER_ID.test(to));
  return true;
}

function formatProperty(path: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else out += out === '' ? String(segment) : `.${String(segment)}`;
  }
  return out;
}
