/**
 * `npm run channel`: the operator's tool for the LINE channels Switchboard serves. It creates or
 * replaces a channel from a JSON file, rotates a channel's secret (the old one keeps verifying
 * webhooks for a grace period), and shows a channel with its secrets and token masked. It never
 * prints a secret or a token, not even in an error.
 *
 * It talks to DynamoDB with the SDK's default credentials, region and endpoint, so the same tool
 * works against AWS and against `npm start`'s local cloud (see HELP).
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { makeDocumentClient } from '#shared/adapters/aws-clients.ts';
import { DynamoCallbackSecretStore } from '#shared/adapters/dynamo-callback-secrets.ts';
import { DynamoChannelStore } from '#shared/adapters/dynamo-channels.ts';
import { type Channel, redactChannel } from '#shared/channels/channel.ts';
import { channelFromInput, InvalidChannelError, rotateSecret } from '#shared/channels/channel-input.ts';
import { isValidClientId } from '#shared/jobs/validation.ts';
import {
  clientSecretName,
  InvalidCallbackSecretError,
  redactCallbackSecret,
  rotateCallbackSecret,
} from '#shared/telephony/callback-secrets.ts';

const HELP = `Usage: npm run channel -- <command> [options]

Manages the LINE channels Switchboard serves. Secrets and access tokens are never printed.

Commands:
  put --file FILE
      Creates or replaces a channel from a JSON file (its secret replaces all previous ones):
        { "channelId": "1656000001", "clientId": "acme",
          "channelSecret": "…", "accessToken": "…",
          "autoAnswer": "push",            (or "reply": free, but at most once)
          "greeting": "Thanks for adding us!",
          "rules": [ { "match": "exact", "pattern": "hours", "answer": "9:00-18:00",
                       "ignoreCase": true } ],     ("exact", "contains" or "regex")
          "fallback": "Sorry, send \\"help\\"." }
  rotate-secret --channel ID --secret S [--grace-hours H]
      Makes S the channel secret. Webhooks signed with the previous one are still accepted for
      H hours (default 24), so none is refused while LINE switches over. S may be "-" to read
      it from standard input, which keeps it out of your shell history.
  show --channel ID
      Prints the channel, secrets and token masked.
  put-callback-secret --provider NAME --secret S [--grace-hours H]
      Sets the secret the telephony provider NAME (the {provider} of the call-status route, the
      stack's -c telephonyProvider, "default" unless set) signs status callbacks with. The
      previous one keeps verifying for H hours (default 24). The call-status function reads it
      within a minute: no deploy. S may be "-" to read it from standard input.
  show-callback-secret --provider NAME
      Prints when the provider's callback secret was set, and until when the previous one works.
  put-telephony-secret --client ID --secret S [--grace-hours H]
      Sets the client's own telephony secret: its Twilio auth token (the broker calls with it and
      the status route checks X-Twilio-Signature with it), or the bearer token of its HTTP
      provider. The previous one keeps verifying callbacks for H hours (default 24; Twilio signs
      with the new token as soon as you promote it, so 0 is right after a Twilio rotation).
  show-telephony-secret --client ID
      Prints when the client's telephony secret was set, masked.

Options:
  --table NAME   the channels table (default: the CHANNELS_TABLE environment variable)
  -h, --help     shows this help

Credentials, region and endpoint are the AWS SDK's defaults (AWS_PROFILE, AWS_REGION, …).
Against the local cloud of \`npm start\`, use the DynamoDB Local URL it prints at start-up:

  AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:<port> AWS_REGION=us-east-1 \\
  AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local \\
  CHANNELS_TABLE=switchboard-local-channels npm run channel -- show --channel demo

Exit status: 0 done; 1 failed (no such channel, DynamoDB error); 2 bad usage or invalid channel.
`;

/** Bad command line or input: exit 2. */
class UsageError extends Error {
  override name = 'UsageError';
}

/** The command could not be carried out: exit 1. */
class CommandFailedError extends Error {
  override name = 'CommandFailedError';
}

type Command =
  | 'put'
  | 'rotate-secret'
  | 'show'
  | 'put-callback-secret'
  | 'show-callback-secret'
  | 'put-telephony-secret'
  | 'show-telephony-secret';

const OPTIONS_OF: Record<Command, readonly string[]> = {
  put: ['file'],
  'rotate-secret': ['channel', 'secret', 'grace-hours'],
  show: ['channel'],
  'put-callback-secret': ['provider', 'secret', 'grace-hours'],
  'show-callback-secret': ['provider'],
  'put-telephony-secret': ['client', 'secret', 'grace-hours'],
  'show-telephony-secret': ['client'],
};

interface Values {
  file?: string;
  channel?: string;
  provider?: string;
  client?: string;
  secret?: string;
  'grace-hours'?: string;
  table?: string;
  help?: boolean;
}

function parseCommandLine(argv: readonly string[]): { command: Command; values: Values } | 'help' {
  let parsed: { values: Values; positionals: string[] };
  try {
    parsed = parseArgs({
      args: [...argv],
      options: {
        file: { type: 'string' },
        channel: { type: 'string' },
        provider: { type: 'string' },
        client: { type: 'string' },
        secret: { type: 'string' },
        'grace-hours': { type: 'string' },
        table: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help) return 'help';
  const [command, ...extra] = positionals;
  const commands = Object.keys(OPTIONS_OF).join(', ');
  if (command === undefined) throw new UsageError(`which command? ${commands}`);
  if (!Object.hasOwn(OPTIONS_OF, command)) {
    throw new UsageError(`unknown command "${command}": use one of ${commands}`);
  }
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);
  const allowed = OPTIONS_OF[command as Command];
  for (const name of Object.keys(values)) {
    if (name !== 'table' && !allowed.includes(name)) {
      throw new UsageError(`${command} takes no --${name}`);
    }
  }
  return { command: command as Command, values };
}

function required(
  values: Values,
  name: 'file' | 'channel' | 'provider' | 'client' | 'secret',
  command: Command,
): string {
  const value = values[name];
  if (value === undefined || value === '') throw new UsageError(`${command} needs --${name}`);
  return value;
}

/** The table from --table, else CHANNELS_TABLE; never a guessed default. */
function tableName(values: Values, env: NodeJS.ProcessEnv): string {
  const table = values.table ?? env.CHANNELS_TABLE;
  if (table === undefined || table === '') {
    throw new UsageError('no channels table: pass --table NAME or set CHANNELS_TABLE');
  }
  return table;
}

/** The channel file's JSON. Parse errors say where, never what: the text holds a secret. */
function readChannelFile(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new UsageError(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`);
  }
  try {
    return JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch (error) {
    const where = /line \d+ column \d+|position \d+/.exec((error as Error).message)?.[0];
    throw new UsageError(`${file} is not valid JSON${where ? ` (${where})` : ''}`);
  }
}

function readSecret(value: string): string {
  if (value !== '-') return value;
  try {
    return readFileSync(0, 'utf8').replace(/\r?\n$/, '');
  } catch {
    throw new UsageError('could not read the secret from standard input');
  }
}

function graceMs(values: Values): number {
  const raw = values['grace-hours'];
  if (raw === undefined) return 24 * 3600_000;
  const hours = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(hours) || hours < 0) {
    throw new UsageError(`--grace-hours must be a number of hours ≥ 0, got ${JSON.stringify(raw)}`);
  }
  return Math.round(hours * 3600_000);
}

/** The record name of the client's telephony secret; the client id is checked as the API checks it. */
function clientSecretOf(values: Values, command: Command): string {
  const clientId = required(values, 'client', command);
  if (!isValidClientId(clientId)) throw new UsageError('--client must be 1-64 letters, digits, _ or -');
  return clientSecretName(clientId);
}

/** Sets a secret (a provider's callback secret, a client's telephony secret); prints it masked. */
async function putSecret(
  doc: DynamoDBDocumentClient,
  table: string,
  values: Values,
  command: Command,
  name: string,
  who: string,
) {
  const secrets = new DynamoCallbackSecretStore(doc, table);
  const secret = readSecret(required(values, 'secret', command));
  const record = rotateCallbackSecret(await secrets.get(name), {
    provider: name,
    secret,
    now: Date.now(),
    graceMs: graceMs(values),
  });
  await secrets.put(record);
  console.error(
    `${who}: new secret in use within a minute` +
      (record.previousValidUntil
        ? `; the previous one verifies until ${new Date(record.previousValidUntil).toISOString()}`
        : ''),
  );
  process.stdout.write(`${JSON.stringify(redactCallbackSecret(record), null, 2)}\n`);
}

async function showSecret(doc: DynamoDBDocumentClient, table: string, name: string, who: string) {
  const record = await new DynamoCallbackSecretStore(doc, table).get(name);
  if (!record) throw new CommandFailedError(`no secret for ${who} in ${table}`);
  process.stdout.write(`${JSON.stringify(redactCallbackSecret(record), null, 2)}\n`);
}

function printChannel(channel: Channel): void {
  process.stdout.write(`${JSON.stringify(redactChannel(channel), null, 2)}\n`);
}

/** The channel store the commands use. */
type Channels = DynamoChannelStore;

/** Creates or replaces a channel from the JSON file named by `--file`; prints it masked. */
async function putChannel(store: Channels, values: Values, table: string): Promise<void> {
  const file = required(values, 'file', 'put');
  const channel = channelFromInput(readChannelFile(file), Date.now());
  await store.put(channel);
  console.error(`channel ${channel.channelId} saved in ${table}`);
  printChannel(channel);
}

/**
 * Makes `--secret` the channel's secret, the previous one accepted for the grace period; only
 * over the version read, so a change made meanwhile (another operator) is not lost.
 */
async function rotateChannelSecret(store: Channels, values: Values, table: string): Promise<void> {
  const channelId = required(values, 'channel', 'rotate-secret');
  const secret = readSecret(required(values, 'secret', 'rotate-secret'));
  const grace = graceMs(values);
  const current = await store.get(channelId);
  if (!current) throw new CommandFailedError(`no channel ${channelId} in ${table}`);
  const rotated = rotateSecret(current, secret, Date.now(), grace);
  if (!(await store.putIfUnchanged(rotated, current.updatedAt))) {
    throw new CommandFailedError(`channel ${channelId} changed while rotating its secret: run it again`);
  }
  const retiring = rotated.secrets.find((s) => s.retiresAt !== undefined);
  console.error(
    `channel ${channelId}: new secret in use` +
      (retiring ? `; the previous one is accepted until ${new Date(retiring.retiresAt!).toISOString()}` : ''),
  );
  printChannel(rotated);
}

/** Prints the channel named by `--channel`, masked. */
async function showChannel(store: Channels, values: Values, table: string): Promise<void> {
  const channelId = required(values, 'channel', 'show');
  const channel = await store.get(channelId);
  if (!channel) throw new CommandFailedError(`no channel ${channelId} in ${table}`);
  printChannel(channel);
}

async function run(command: Command, values: Values, doc: DynamoDBDocumentClient, table: string) {
  const store = new DynamoChannelStore(doc, table);
  switch (command) {
    case 'put':
      return putChannel(store, values, table);
    case 'rotate-secret':
      return rotateChannelSecret(store, values, table);
    case 'show':
      return showChannel(store, values, table);
    case 'put-callback-secret': {
      const provider = required(values, 'provider', command);
      return putSecret(doc, table, values, command, provider, `provider ${values.provider}`);
    }
    case 'show-callback-secret':
      return showSecret(doc, table, required(values, 'provider', command), `provider ${values.provider}`);
    case 'put-telephony-secret': {
      const name = clientSecretOf(values, command);
      return putSecret(doc, table, values, command, name, `client ${values.client}`);
    }
    case 'show-telephony-secret':
      return showSecret(doc, table, clientSecretOf(values, command), `client ${values.client}`);
  }
}

async function main(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  let doc: DynamoDBDocumentClient | undefined;
  try {
    const parsed = parseCommandLine(argv);
    if (parsed === 'help') {
      process.stdout.write(HELP);
      return 0;
    }
    const table = tableName(parsed.values, env);
    doc = makeDocumentClient();
    await run(parsed.command, parsed.values, doc, table);
    return 0;
  } catch (error) {
    if (error instanceof InvalidCallbackSecretError) {
      console.error(`invalid callback secret: ${error.message}`);
      return 2;
    }
    if (error instanceof InvalidChannelError) {
      console.error('invalid channel:');
      for (const [field, messages] of Object.entries(error.fieldErrors)) {
        for (const message of messages) console.error(`  ${field}: ${message}`);
      }
      return 2;
    }
    if (error instanceof UsageError) {
      console.error(`${error.message}\n(npm run channel -- --help for usage)`);
      return 2;
    }
    if (error instanceof CommandFailedError) {
      console.error(error.message);
      return 1;
    }
    // SDK errors (no credentials, no region, no table…) name the problem without any item value.
    const e = error as Error;
    console.error(`failed: ${e.name}: ${e.message}`);
    return 1;
  } finally {
    doc?.destroy();
  }
}

process.exitCode = await main(process.argv.slice(2), process.env);
