/**
 * A send request read into the emails SES would assemble: `Content.Simple` (subject, text and
 * HTML bodies, extra `Headers`, attachments), `Content.Raw` (a MIME message, read for its headers
 * and measured), `Content.Template` (a stored template by `TemplateName`/`TemplateArn`, or
 * `TemplateContent` inline, rendered with `TemplateData`), and for `SendBulkEmail` one email per
 * `BulkEmailEntries[]` item (its `ReplacementTemplateData` over the default data, its
 * `ReplacementHeaders` over the template's headers of the same name, its `ReplacementTags` over
 * `DefaultEmailTags`).
 *
 * Refused as SES refuses them (`BadRequestException`): tags other than ASCII letters, digits, `_`
 * and `-` or longer than 256 (API_MessageTag), header names and values outside printable ASCII or
 * longer than 126 / 870 (API_MessageHeader), illegal addresses, more than 50 recipients, template
 * data that is not a JSON object. A template naming an attribute the data lacks is not refused: SES
 * accepts the email and publishes a Rendering Failure event ("Attribute 'x' is not present in the
 * rendering data."). Only `{{name}}` and `{{a.b}}` substitutions are rendered, not Handlebars'
 * block helpers.
 */

import { LocalCloudError } from '../errors.ts';
import { type JsonFields, sesError } from './wire.ts';

export interface MessageHeader {
  readonly name: string;
  readonly value: string;
}

export interface TemplateContent {
  readonly subject?: string;
  readonly text?: string;
  readonly html?: string;
}

/** One email as SES assembles it from a request. */
export interface ComposedEmail {
  /** `FromEmailAddress` as given (`Name <address>` or an address). */
  readonly from: string;
  readonly fromAddress: string;
  /** Bare addresses. */
  readonly to: readonly string[];
  readonly cc: readonly string[];
  readonly bcc: readonly string[];
  readonly replyTo: readonly string[];
  readonly subject?: string;
  readonly text?: string;
  readonly html?: string;
  /** The headers the caller added (`Headers`, `ReplacementHeaders`), or a raw message's own. */
  readonly headers: readonly MessageHeader[];
  readonly tags: Readonly<Record<string, string>>;
  /** The stored template used, by name. */
  readonly template?: string;
  /** Bytes as sent, bodies and attachments base64-encoded: what the 40 MB limit measures. */
  readonly size: number;
  /** Sent as `Content.Raw`: `headers` are the MIME message's own. */
  readonly raw?: boolean;
  /** A raw email's MIME message, as sent. */
  readonly message?: Uint8Array;
  /** Why the template could not be rendered: the email is accepted, then not sent. */
  readonly renderingFailure?: string;
}

/** An email SES accepted: what `sent()` lists and the events describe. */
export interface SentEmail extends ComposedEmail {
  readonly messageId: string;
  /** Clock ms it was accepted. */
  readonly at: number;
  readonly operation: 'SendEmail' | 'SendBulkEmail';
  readonly configurationSet?: string;
}

/** Recipients one message may have, To, Cc and Bcc together; entries one bulk call may have. */
export const MAX_DESTINATIONS = 50;

const TAG = /^[A-Za-z0-9_-]{1,256}$/;
const HEADER_NAME = /^[!-9;-~]{1,126}$/;
const HEADER_VALUE = /^[ -~]{1,870}$/;
const ADDRESS = /^[^\s@<>()",;:]+@[^\s@<>()",;:]+\.[^\s@<>()",;:]+$/;
const PLACEHOLDER = /\{\{\s*([A-Za-z_$][\w$-]*(?:\.[\w$-]+)*)\s*\}\}/g;

/** Templates created with `CreateEmailTemplate`, by name. */
export class EmailTemplates {
  readonly #templates = new Map<string, TemplateContent>();

  create(name: string, content: TemplateContent): void {
    if (this.#templates.has(name))
      throw sesError('AlreadyExistsException', `Template ${name} already exists.`);
    this.#templates.set(name, content);
  }

  get(name: string): TemplateContent {
    const found = this.#templates.get(name);
    if (!found) throw sesError('NotFoundException', `Template ${name} does not exist.`);
    return found;
  }

  delete(name: string): void {
    this.get(name);
    this.#templates.delete(name);
  }
}

/** The address inside `Name <address>`, checked. */
export function bareAddress(value: string): string {
  const inside = /<([^<>]*)>\s*$/.exec(value)?.[1] ?? value;
  const address = inside.trim();
  if (!ADDRESS.test(address)) throw sesError('BadRequestException', `Illegal address: ${value}`);
  return address;
}

function readTags(list: readonly JsonFields[]): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const tag of list) {
    const name = tag.string('Name');
    const value = tag.optionalString('Value') ?? '';
    if (!TAG.test(name) || !TAG.test(value)) {
      throw sesError(
        'BadRequestException',
        `Invalid message tag ${name}=${value}: a tag name and value may only contain ASCII letters, numbers, underscores and dashes, at most 256 of them`,
      );
    }
    tags[name] = value;
  }
  return tags;
}

function readHeaders(list: readonly JsonFields[]): MessageHeader[] {
  return list.map((header) => {
    const name = header.string('Name');
    const value = header.string('Value');
    if (!HEADER_NAME.test(name)) {
      throw sesError(
        'BadRequestException',
        `Invalid header name ${name}: printable ASCII but ':' only, at most 126`,
      );
    }
    if (!HEADER_VALUE.test(value)) {
      throw sesError(
        'BadRequestException',
        `Invalid value of header ${name}: printable ASCII only, at most 870`,
      );
    }
    return { name, value };
  });
}

/** `base` with each of `over`'s headers replacing base's of the same name (any case). */
function overHeaders(base: readonly MessageHeader[], over: readonly MessageHeader[]): MessageHeader[] {
  const replaced = new Set(over.map((h) => h.name.toLowerCase()));
  return [...base.filter((h) => !replaced.has(h.name.toLowerCase())), ...over];
}

function templateData(json: string | undefined): Record<string, unknown> {
  if (json === undefined || json === '') return {};
  try {
    const value = JSON.parse(json) as unknown;
    if (typeof value === 'object' && value !== null && !Array.isArray(value))
      return value as Record<string, unknown>;
  } catch {
    // refused below
  }
  throw sesError('BadRequestException', 'Invalid template data: it must be a JSON object');
}

class RenderingFailure extends LocalCloudError {}

function render(part: string | undefined, data: Record<string, unknown>): string | undefined {
  if (part === undefined) return undefined;
  return part.replace(PLACEHOLDER, (_, path: string) => {
    let value: unknown = data;
    for (const key of path.split('.')) {
      value =
        typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
    }
    if (value === undefined || value === null) {
      throw new RenderingFailure(`Attribute '${path}' is not present in the rendering data.`);
    }
    return typeof value === 'object' ? JSON.stringify(value) : String(value);
  });
}

const base64Length = (bytes: number) => Math.ceil(bytes / 3) * 4;

function sizeOf(parts: {
  readonly headers: readonly MessageHeader[];
  readonly subject?: string;
  readonly text?: string;
  readonly html?: string;
  readonly attachmentBase64: number;
}): number {
  const headerBytes = parts.headers.reduce(
    (sum, h) => sum + Buffer.byteLength(`${h.name}: ${h.value}\r\n`),
    0,
  );
  const body = (text?: string) => (text === undefined ? 0 : base64Length(Buffer.byteLength(text)));
  return (
    headerBytes +
    Buffer.byteLength(parts.subject ?? '') +
    body(parts.text) +
    body(parts.html) +
    parts.attachmentBase64
  );
}

/** Attachments' `RawContent`, base64 on the wire: their length as sent. */
function attachmentsSize(list: readonly JsonFields[]): number {
  return list.reduce((sum, attachment) => sum + attachment.string('RawContent').length, 0);
}

interface Envelope {
  readonly from: string;
  readonly to: readonly string[];
  readonly cc: readonly string[];
  readonly bcc: readonly string[];
  readonly replyTo: readonly string[];
}

function readDestination(destination: JsonFields | undefined): Pick<Envelope, 'to' | 'cc' | 'bcc'> {
  const to = (destination?.strings('ToAddresses') ?? []).map(bareAddress);
  const cc = (destination?.strings('CcAddresses') ?? []).map(bareAddress);
  const bcc = (destination?.strings('BccAddresses') ?? []).map(bareAddress);
  const count = to.length + cc.length + bcc.length;
  if (count > MAX_DESTINATIONS) throw sesError('BadRequestException', 'Recipient count exceeds 50.');
  return { to, cc, bcc };
}

/** A template's content: stored (by name or ARN) or inline. */
function templateOf(
  template: JsonFields,
  templates: EmailTemplates,
): { name?: string; content: TemplateContent } {
  const arn = template.optionalString('TemplateArn');
  const name = template.optionalString('TemplateName') ?? arn?.slice(arn.lastIndexOf('/') + 1);
  if (name) return { name, content: templates.get(name) };
  const inline = template.optionalObject('TemplateContent');
  if (!inline) {
    throw sesError(
      'BadRequestException',
      'A template needs a TemplateName, a TemplateArn or a TemplateContent',
    );
  }
  return {
    content: {
      subject: inline.optionalString('Subject'),
      text: inline.optionalString('Text'),
      html: inline.optionalString('Html'),
    },
  };
}

/** One templated email: rendered, or its rendering failure recorded. */
function renderTemplated(
  envelope: Envelope,
  template: { name?: string; content: TemplateContent },
  data: Record<string, unknown>,
  extra: { headers: readonly MessageHeader[]; tags: Record<string, string>; attachmentBase64: number },
): ComposedEmail {
  const base = {
    ...envelope,
    fromAddress: bareAddress(envelope.from),
    headers: extra.headers,
    tags: extra.tags,
  };
  const named = template.name === undefined ? {} : { template: template.name };
  try {
    const rendered = {
      subject: render(template.content.subject, data),
      text: render(template.content.text, data),
      html: render(template.content.html, data),
    };
    return { ...base, ...named, ...rendered, size: sizeOf({ ...rendered, ...extra }) };
  } catch (error) {
    if (!(error instanceof RenderingFailure)) throw error;
    return { ...base, ...named, size: 0, renderingFailure: error.message };
  }
}

/** The raw MIME message's header fields, unfolded. */
function rawHeaders(raw: Buffer): MessageHeader[] {
  const text = raw.toString('latin1');
  const end = text.search(/\r?\n\r?\n/);
  const section = (end < 0 ? text : text.slice(0, end)).replace(/\r?\n[ \t]+/g, ' ');
  return section
    .split(/\r?\n/)
    .map((line) => /^([^:\s]+):\s*(.*)$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ name: m[1]!, value: m[2]! }));
}

function rawEmail(raw: JsonFields, input: JsonFields, tags: Record<string, string>): ComposedEmail {
  const data = Buffer.from(raw.string('Data'), 'base64');
  const headers = rawHeaders(data);
  const field = (name: string) => headers.find((h) => h.name.toLowerCase() === name)?.value;
  const list = (name: string) => (field(name) ?? '').split(',').filter((s) => s.trim() !== '');
  const from = input.optionalString('FromEmailAddress') ?? field('from');
  if (!from) throw sesError('BadRequestException', 'Missing required parameter FromEmailAddress');
  const given = input.optionalObject('Destination');
  const destination = given
    ? readDestination(given)
    : { to: list('to').map(bareAddress), cc: list('cc').map(bareAddress), bcc: list('bcc').map(bareAddress) };
  return {
    from,
    fromAddress: bareAddress(from),
    ...destination,
    replyTo: input.strings('ReplyToAddresses').map(bareAddress),
    subject: field('subject'),
    headers,
    tags,
    size: data.length,
    raw: true,
    message: data,
  };
}

/** `SendEmail`'s one email. */
export function composeSendEmail(input: JsonFields, templates: EmailTemplates): ComposedEmail {
  const content = input.object('Content');
  const kinds = ['Simple', 'Raw', 'Template'].filter((kind) => content.has(kind));
  if (kinds.length !== 1) {
    throw sesError('BadRequestException', 'Content must have exactly one of Simple, Raw and Template');
  }
  const tags = readTags(input.objects('EmailTags'));
  const raw = content.optionalObject('Raw');
  if (raw) return rawEmail(raw, input, tags);
  const envelope: Envelope = {
    from: input.string('FromEmailAddress'),
    ...readDestination(input.optionalObject('Destination')),
    replyTo: input.strings('ReplyToAddresses').map(bareAddress),
  };
  const simple = content.optionalObject('Simple');
  if (simple) {
    const body = simple.object('Body');
    const parts = {
      subject: simple.object('Subject').string('Data'),
      text: body.optionalObject('Text')?.string('Data'),
      html: body.optionalObject('Html')?.string('Data'),
      headers: readHeaders(simple.objects('Headers')),
      attachmentBase64: attachmentsSize(simple.objects('Attachments')),
    };
    return { ...envelope, fromAddress: bareAddress(envelope.from), ...parts, tags, size: sizeOf(parts) };
  }
  const template = content.object('Template');
  return renderTemplated(
    envelope,
    templateOf(template, templates),
    templateData(template.optionalString('TemplateData')),
    {
      headers: readHeaders(template.objects('Headers')),
      tags,
      attachmentBase64: attachmentsSize(template.objects('Attachments')),
    },
  );
}

/** `SendBulkEmail`'s emails, one per entry, in order. */
export function composeBulkEmail(input: JsonFields, templates: EmailTemplates): ComposedEmail[] {
  const entries = input.objects('BulkEmailEntries');
  if (entries.length === 0)
    throw sesError('BadRequestException', 'Missing required parameter BulkEmailEntries');
  if (entries.length > MAX_DESTINATIONS) {
    throw sesError('BadRequestException', `Too many BulkEmailEntries: ${entries.length}; at most 50 a call`);
  }
  const defaultTemplate = input.object('DefaultContent').object('Template');
  const template = templateOf(defaultTemplate, templates);
  const defaultData = templateData(defaultTemplate.optionalString('TemplateData'));
  const defaultHeaders = readHeaders(defaultTemplate.objects('Headers'));
  const defaultTags = readTags(input.objects('DefaultEmailTags'));
  const attachmentBase64 = attachmentsSize(defaultTemplate.objects('Attachments'));
  const from = input.string('FromEmailAddress');
  const replyTo = input.strings('ReplyToAddresses').map(bareAddress);
  return entries.map((entry) => {
    const replacement = entry
      .optionalObject('ReplacementEmailContent')
      ?.optionalObject('ReplacementTemplate')
      ?.optionalString('ReplacementTemplateData');
    const envelope: Envelope = { from, ...readDestination(entry.object('Destination')), replyTo };
    return renderTemplated(
      envelope,
      template,
      { ...defaultData, ...templateData(replacement) },
      {
        headers: overHeaders(defaultHeaders, readHeaders(entry.objects('ReplacementHeaders'))),
        tags: { ...defaultTags, ...readTags(entry.objects('ReplacementTags')) },
        attachmentBase64,
      },
    );
  });
}
