/**
 * Every command of the operator CLI, its options and its help, in one table: the parser, the help
 * and the dispatcher all read it, so a command cannot be runnable but undocumented.
 */

export interface OptionSpec {
  readonly type: 'string' | 'boolean';
  /** The value's placeholder in the help (`N`, `FILE`…). */
  readonly value?: string;
  readonly help: string;
  readonly required?: boolean;
}

export interface CommandSpec {
  /** `group action`, e.g. `jobs create`. */
  readonly name: string;
  readonly summary: string;
  /** The positionals as the usage line shows them, e.g. `<jobId>`. */
  readonly args: string;
  readonly positionals: { readonly min: number; readonly max: number };
  readonly options: Readonly<Record<string, OptionSpec>>;
  /** More help, after the options. */
  readonly details?: string;
}

/** Options every command takes: where the API is, and how to print. */
export const GLOBAL_OPTIONS: Readonly<Record<string, OptionSpec>> = {
  endpoint: {
    type: 'string',
    value: 'URL',
    help: 'the HTTP API (default: $SWITCHBOARD_API_URL, then cdk-outputs.json, then a running npm start)',
  },
  local: {
    type: 'boolean',
    help: 'talk to the running npm start (its URL and credentials from .switchboard/local.json)',
  },
  region: {
    type: 'string',
    value: 'REGION',
    help: "the API's region (default: from the URL, then $AWS_REGION)",
  },
  outputs: {
    type: 'string',
    value: 'FILE',
    help: 'the file of `cdk deploy --outputs-file` to read the API URL from (default: cdk-outputs.json)',
  },
  stack: { type: 'string', value: 'NAME', help: 'which stack of the outputs file, when it holds several' },
  json: { type: 'boolean', help: 'print machine-readable JSON on stdout' },
  help: { type: 'boolean', help: 'show help' },
};

/** The positionals of a command that takes none. */
const NO_ARGS = { args: '', positionals: { min: 0, max: 0 } } as const;

/** The positionals of a command about one thing (`<jobId>`). */
function oneArg(name: string): Pick<CommandSpec, 'args' | 'positionals'> {
  return { args: `<${name}>`, positionals: { min: 1, max: 1 } };
}

/** The options of a command that prints a list a page at a time: the page's size, where the next starts. */
function paging(items: string, sizes: string): Readonly<Record<string, OptionSpec>> {
  return {
    limit: { type: 'string', value: 'N', help: `${items} per page (${sizes})` },
    next: { type: 'string', value: 'TOKEN', help: 'the page after the one that printed this token' },
  };
}

const CLIENT: OptionSpec = { type: 'string', value: 'ID', help: 'the client', required: true };
const WATCH_TIMEOUT: OptionSpec = {
  type: 'string',
  value: 'S',
  help: 'with --watch: give up (exit 1) after S seconds; the job goes on',
};

const SETTINGS_OPTIONS: Readonly<Record<string, OptionSpec>> = {
  file: {
    type: 'string',
    value: 'FILE',
    help: 'the settings as JSON (the fields of PUT /clients/{clientId})',
  },
  merge: { type: 'boolean', help: "start from the client's current settings (change only what you give)" },
  'max-concurrent-calls': { type: 'string', value: 'N', help: 'most calls in flight at once' },
  'calls-per-second': { type: 'string', value: 'R', help: 'most call starts per second (the line)' },
  'time-zone': { type: 'string', value: 'ZONE', help: 'IANA time zone, e.g. Asia/Tokyo' },
  'calling-hours': {
    type: 'string',
    value: 'HOURS',
    help: 'e.g. "mon-fri=09:00-18:00,sat=10:00-12:00+13:00-17:00", "all=00:00-24:00", JSON or @FILE',
  },
  'default-region': {
    type: 'string',
    value: 'CC',
    help: 'region of numbers without a country code, e.g. JP',
  },
  'message-channel': { type: 'string', value: 'ID', help: 'the LINE channel message jobs send through' },
  'restricted-periods': {
    type: 'string',
    value: 'JSON',
    help: 'dates or ranges when nothing starts, e.g. \'[{"start":"2026-12-29","end":"2027-01-03"}]\', or @FILE',
  },
  holidays: {
    type: 'string',
    value: 'CC',
    help: "no call or message on this country's public holidays, e.g. JP",
  },
};

const JOB_OPTIONS: Readonly<Record<string, OptionSpec>> = {
  client: CLIENT,
  csv: { type: 'string', value: 'FILE', help: 'the list (CSV: UTF-8, Shift_JIS or UTF-16)', required: true },
  name: { type: 'string', value: 'NAME', help: "the job's name (default: the file's name)" },
  channel: {
    type: 'string',
    value: 'call|line|email|sms',
    help: "call, line, email or sms (default: the client's); message is taken for line; a list such as line,email,sms falls back through them in order (each channel's content in --options)",
  },
  message: {
    type: 'string',
    value: 'TEXT',
    help: "a LINE or SMS job's text; {{column}} is filled per row",
  },
  'message-file': {
    type: 'string',
    value: 'FILE',
    help: 'the message from a file: JSON {"messages": [...]} or plain text',
  },
  'start-at': {
    type: 'string',
    value: 'TIME',
    help: 'not before this ISO 8601 time, e.g. 2025-06-01T09:00:00+09:00',
  },
  'calling-hours': {
    type: 'string',
    value: 'HOURS',
    help: "the job's own calling hours (as for clients put)",
  },
  'restricted-periods': {
    type: 'string',
    value: 'JSON',
    help: 'dates or ranges when nothing of the job starts (on top of the client ones), e.g. \'[{"start":"2026-12-29","end":"2027-01-03"}]\', or @FILE',
  },
  holidays: {
    type: 'string',
    value: 'CC',
    help: "no call or message on this country's public holidays, e.g. JP",
  },
  'time-zone-by': {
    type: 'string',
    value: 'client|recipient',
    help: "read the hours and periods in the client's zone (default) or each recipient's",
  },
  scenario: { type: 'string', value: 'ID', help: 'the call scenario (scenarioId)' },
  'max-attempts': { type: 'string', value: 'N', help: 'attempts per task, the first included' },
  'retry-delay': { type: 'string', value: 'S', help: 'seconds between attempts' },
  retries: { type: 'string', value: 'JSON', help: 'retries by outcome (see docs/api.md), JSON or @FILE' },
  'ring-timeout': { type: 'string', value: 'S', help: 'seconds a call may ring' },
  'recipient-column': { type: 'string', value: 'NAME', help: 'the column that holds the recipient' },
  options: {
    type: 'string',
    value: 'FILE',
    help: 'job options as JSON (the body of POST …/jobs); flags win',
  },
  watch: {
    type: 'boolean',
    help: "then show the ingest's result and live progress until the job is done",
  },
  timeout: WATCH_TIMEOUT,
  rows: { type: 'string', value: 'N', help: 'rejected and skipped rows to print (default 20, at most 500)' },
};

const RECIPIENTS_DETAILS = `A recipient is a LINE user id (U + 32 hex digits) or a phone number, written as in a list
(090-1234-5678 is read in the client's default region).`;

/** The suppression (do-not-call) list: nobody on it is called or messaged by any job of the client. */
const SUPPRESSION_COMMANDS: readonly CommandSpec[] = [
  {
    name: 'suppressions add',
    summary: "put recipients on the client's suppression list (source api)",
    args: '<recipient>...',
    positionals: { min: 1, max: 100 },
    options: { client: CLIENT, reason: { type: 'string', value: 'TEXT', help: 'why (kept on each entry)' } },
    details: `${RECIPIENTS_DETAILS} A task of a recipient on the list ends cancelled ("suppressed: api")
when its call would start or its message be claimed, even in a job already running.`,
  },
  {
    name: 'suppressions remove',
    summary: "take a recipient off the client's suppression list",
    ...oneArg('recipient'),
    options: { client: CLIENT },
    details: RECIPIENTS_DETAILS,
  },
  {
    name: 'suppressions list',
    summary: 'look recipients up on the suppression list, or page through it',
    args: '[<recipient>...]',
    positionals: { min: 0, max: 100 },
    options: {
      client: CLIENT,
      ...paging('entries', '1-500, default 50'),
    },
  },
  {
    name: 'suppressions upload',
    summary: 'add every recipient of a CSV to the suppression list (source csv); bad rows are listed',
    ...NO_ARGS,
    options: {
      client: CLIENT,
      csv: {
        type: 'string',
        value: 'FILE',
        help: 'the list (as a call or message list is read)',
        required: true,
      },
      reason: { type: 'string', value: 'TEXT', help: 'why, for rows without a reason/理由 column' },
    },
  },
];

export const COMMANDS: readonly CommandSpec[] = [
  {
    name: 'clients put',
    summary: "create or replace a client's settings",
    ...oneArg('clientId'),
    options: SETTINGS_OPTIONS,
    details: `The settings come from --file, then the flags (a flag wins). Without --merge they replace
the client's settings as a whole, so a new client needs at least --max-concurrent-calls,
--calls-per-second, --time-zone, --calling-hours and --default-region. Example:

  npm run ops -- clients put acme --max-concurrent-calls 6 --calls-per-second 2 \\
    --time-zone Asia/Tokyo --calling-hours "mon-fri=09:00-18:00" --default-region JP
  npm run ops -- clients put acme --merge --calls-per-second 3`,
  },
  {
    name: 'clients list',
    summary: 'every client, by id (an operator allowed GET /clients)',
    ...NO_ARGS,
    options: {
      ...paging('clients', '1-100, default 50'),
    },
  },
  {
    name: 'clients get',
    summary: "show a client's settings",
    ...oneArg('clientId'),
    options: {},
  },
  {
    name: 'clients pause',
    summary: 'pause a whole client: none of its calls or messages start',
    ...oneArg('clientId'),
    options: {},
  },
  {
    name: 'clients resume',
    summary: 'resume a paused client',
    ...oneArg('clientId'),
    options: {},
  },
  {
    name: 'jobs create',
    summary: 'create a job from a CSV list (uploaded to its presigned URL), and watch it',
    ...NO_ARGS,
    options: JOB_OPTIONS,
    details: `The API answers with an upload URL; the file is PUT there (a progress bar on stderr) and the
ingest reads it row by row. With --watch: the ingest's result (rows, tasks, and the rejected and
skipped rows with row, column and reason), then the job's progress until it is done. Without
--watch the job id is printed; "jobs show --watch" follows it later. Example:

  npm run ops -- jobs create --client acme --csv list.csv --watch
  npm run ops -- jobs create --client acme --csv users.csv --channel line \\
    --message "Hello {{name}}" --start-at 2025-06-01T10:00:00+09:00`,
  },
  {
    name: 'jobs list',
    summary: "a client's jobs, newest first",
    ...NO_ARGS,
    options: {
      client: CLIENT,
      ...paging('jobs', '1-100, default 20'),
    },
  },
  {
    name: 'jobs show',
    summary: "a job's status, counts and what it waits for",
    ...oneArg('jobId'),
    options: {
      client: CLIENT,
      watch: { type: 'boolean', help: 'follow its progress until the job is done' },
      timeout: WATCH_TIMEOUT,
    },
  },
  {
    name: 'jobs pause',
    summary: 'pause a job (a message job: once its broker has stopped sending)',
    ...oneArg('jobId'),
    options: { client: CLIENT },
  },
  {
    name: 'jobs resume',
    summary: 'resume a paused job',
    ...oneArg('jobId'),
    options: { client: CLIENT },
  },
  {
    name: 'jobs cancel',
    summary: 'cancel a job: tasks not started end cancelled (retrying a cancel is safe)',
    ...oneArg('jobId'),
    options: { client: CLIENT },
  },
  {
    name: 'jobs report',
    summary: "download a job's report CSV (every row's outcome; rejected and skipped rows)",
    ...oneArg('jobId'),
    options: {
      client: CLIENT,
      out: { type: 'string', value: 'FILE', help: 'write it to FILE (default: stdout)' },
    },
  },
  {
    name: 'optouts lookup',
    summary: "whether recipients are opted out (unfollowed one of the client's channels)",
    args: '<recipient>...',
    positionals: { min: 1, max: 100 },
    options: { client: CLIENT },
    details: `A recipient is a LINE user id (U + 32 hex digits) or a phone number, written as in a list
(090-1234-5678 is read in the client's default region). Opt-outs are the client's: an unfollow
on any of its channels opts the user out of all its later jobs.`,
  },
  {
    name: 'optouts list',
    summary: "the client's opted-out recipients, a page at a time",
    ...NO_ARGS,
    options: {
      client: CLIENT,
      ...paging('recipients', '1-500, default 50'),
    },
  },
  ...SUPPRESSION_COMMANDS,
];

/** Every option name any command takes, with its type: one name means one type everywhere. */
export function allOptions(): ReadonlyMap<string, OptionSpec> {
  const all = new Map<string, OptionSpec>(Object.entries(GLOBAL_OPTIONS));
  for (const command of COMMANDS)
    for (const [name, spec] of Object.entries(command.options)) {
      const known = all.get(name);
      if (known && known.type !== spec.type) throw new Error(`--${name} is declared with two types`);
      if (!known) all.set(name, spec);
    }
  return all;
}

export const GROUPS = [...new Set(COMMANDS.map((c) => c.name.split(' ')[0]!))];

const PROGRAM = 'npm run ops --';

function optionLines(options: Readonly<Record<string, OptionSpec>>): string[] {
  const rows = Object.entries(options).map(([name, spec]) => [
    `--${name}${spec.value ? ` ${spec.value}` : ''}`,
    `${spec.help}${spec.required ? ' (required)' : ''}`,
  ]);
  const width = Math.max(...rows.map(([left]) => left!.length), 0) + 2;
  return rows.map(([left, right]) => `  ${left!.padEnd(width)}${right}`);
}

/** The help of one command. */
export function commandHelp(command: CommandSpec): string {
  const required = Object.entries(command.options)
    .filter(([, spec]) => spec.required)
    .map(([name, spec]) => `--${name} ${spec.value}`);
  const usage = [PROGRAM, command.name, ...required, command.args, '[options]'].filter((s) => s !== '');
  const lines = [`Usage: ${usage.join(' ')}`, '', `${capitalise(command.summary)}.`];
  if (Object.keys(command.options).length > 0) lines.push('', 'Options:', ...optionLines(command.options));
  lines.push('', 'Global options:', ...optionLines(GLOBAL_OPTIONS));
  if (command.details) lines.push('', command.details);
  return `${lines.join('\n')}\n`;
}

/** The help of a group (`jobs`), or of the whole CLI. */
export function overviewHelp(group?: string): string {
  const commands = COMMANDS.filter((c) => group === undefined || c.name.startsWith(`${group} `));
  const width = Math.max(...commands.map((c) => `${c.name} ${c.args}`.length)) + 2;
  const lines = [
    `Usage: ${PROGRAM} ${group ?? '<command>'} ${group ? '<action> ' : ''}[options]   (or: npx switchboard-ops …)`,
    '',
    'The operator CLI of Switchboard: client settings, jobs and opt-outs through the operator API,',
    'signed with SigV4 (your AWS credentials against a deployed stack, the local ones for npm start).',
    '',
    'Commands:',
    ...commands.map((c) => `  ${`${c.name} ${c.args}`.padEnd(width)}${c.summary}`),
    '',
    'Global options:',
    ...optionLines(GLOBAL_OPTIONS),
    '',
    `"${PROGRAM} <command> --help" shows a command's options.`,
  ];
  if (group === undefined) {
    lines.push(
      '',
      'Where the API is: --endpoint, else $SWITCHBOARD_API_URL, else the HttpApiUrl output in',
      'cdk-outputs.json (written by `npm run cdk -- deploy --outputs-file cdk-outputs.json`), else the',
      "npm start running in this checkout (or say --local). Against AWS the credentials are the SDK's",
      'default chain (AWS_PROFILE, SSO, environment, instance role) and need execute-api:Invoke on the',
      'routes of the clients you operate.',
      '',
      'Exit status: 0 done; 1 failed (the API refused, a network error, no credentials, a watched job',
      'that failed or was cancelled); 2 bad usage.',
    );
  }
  return `${lines.join('\n')}\n`;
}

function capitalise(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
