/**
 * Reads the command line: `<group> <action> [positionals] [--option value | --option=value |
 * --flag]`, options anywhere, `--` ends them. Every mistake is a {@link UsageError} naming it, so
 * the user gets one line and exit status 2, never a stack.
 */
import {
  allOptions,
  COMMANDS,
  type CommandSpec,
  commandHelp,
  GLOBAL_OPTIONS,
  GROUPS,
  overviewHelp,
} from './commands.ts';
import { UsageError } from './errors.ts';

export interface GlobalOptions {
  readonly endpoint?: string;
  readonly local: boolean;
  readonly region?: string;
  readonly outputs?: string;
  readonly stack?: string;
  readonly json: boolean;
}

export type Options = Readonly<Record<string, string | boolean | undefined>>;

export type CommandLine =
  | { readonly kind: 'help'; readonly text: string }
  | {
      readonly kind: 'command';
      readonly command: CommandSpec;
      readonly positionals: readonly string[];
      /** The command's own options (strings and booleans, as given). */
      readonly options: Options;
      readonly global: GlobalOptions;
    };

interface Tokens {
  readonly words: string[];
  readonly options: Map<string, string | boolean>;
  help: boolean;
}

/** Splits argv into words and options, checking each option against every command's table. */
function tokenize(argv: readonly string[]): Tokens {
  const known = allOptions();
  const tokens: Tokens = { words: [], options: new Map(), help: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      tokens.words.push(...argv.slice(i + 1));
      break;
    }
    if (arg === '-h') {
      tokens.help = true;
      continue;
    }
    if (!arg.startsWith('--')) {
      if (arg.startsWith('-') && arg.length > 1 && !/^-\d/.test(arg))
        throw new UsageError(`unknown option ${arg}`);
      tokens.words.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq === -1 ? undefined : eq);
    const spec = known.get(name);
    if (!spec) throw new UsageError(`unknown option --${name}${suggestion(name, [...known.keys()])}`);
    if (tokens.options.has(name)) throw new UsageError(`--${name} is given twice`);
    if (spec.type === 'boolean') {
      if (eq !== -1) throw new UsageError(`--${name} takes no value`);
      tokens.options.set(name, true);
      continue;
    }
    let value: string | undefined;
    if (eq !== -1) value = arg.slice(eq + 1);
    else {
      value = argv[i + 1];
      if (value === undefined || value.startsWith('--'))
        throw new UsageError(`--${name} needs a value (${spec.value ?? 'a value'})`);
      i++;
    }
    tokens.options.set(name, value);
  }
  if (tokens.options.get('help') === true) tokens.help = true;
  return tokens;
}

/** Reads argv (without `node` and the script) into a command to run, or the help to print. */
export function parseCommandLine(argv: readonly string[]): CommandLine {
  const tokens = tokenize(argv);
  const words = [...tokens.words];
  if (words[0] === 'help') {
    words.shift();
    tokens.help = true;
  }
  const [group, action, ...positionals] = words;
  if (group === undefined) {
    if (tokens.help) return { kind: 'help', text: overviewHelp() };
    throw new UsageError(`which command? ${GROUPS.join(', ')} (see npm run ops -- --help)`);
  }
  if (!GROUPS.includes(group)) {
    throw new UsageError(`unknown command "${group}": use ${GROUPS.join(', ')}${suggestion(group, GROUPS)}`);
  }
  const actions = COMMANDS.filter((c) => c.name.startsWith(`${group} `)).map((c) =>
    c.name.slice(group.length + 1),
  );
  if (action === undefined) {
    if (tokens.help) return { kind: 'help', text: overviewHelp(group) };
    throw new UsageError(`which ${group} command? ${actions.join(', ')}`);
  }
  const command = COMMANDS.find((c) => c.name === `${group} ${action}`);
  if (!command) {
    const near = actions.find((a) => a.startsWith(action) || distance(a, action) <= 2);
    throw new UsageError(
      `unknown command "${group} ${action}": use ${group} ${actions.join('|')}${near ? ` (did you mean ${group} ${near}?)` : ''}`,
    );
  }
  if (tokens.help) return { kind: 'help', text: commandHelp(command) };
  return { kind: 'command', command, positionals, ...checked(command, positionals, tokens.options) };
}

function checked(
  command: CommandSpec,
  positionals: readonly string[],
  given: ReadonlyMap<string, string | boolean>,
): { options: Options; global: GlobalOptions } {
  const options: Record<string, string | boolean> = {};
  const global: Record<string, string | boolean> = {};
  for (const [name, value] of given) {
    if (Object.hasOwn(command.options, name)) options[name] = value;
    else if (Object.hasOwn(GLOBAL_OPTIONS, name)) global[name] = value;
    else
      throw new UsageError(`${command.name} takes no --${name} (see npm run ops -- ${command.name} --help)`);
  }
  for (const [name, spec] of Object.entries(command.options)) {
    if (spec.required && options[name] === undefined)
      throw new UsageError(`${command.name} needs --${name} ${spec.value ?? ''}`.trimEnd());
  }
  if (positionals.length < command.positionals.min)
    throw new UsageError(`${command.name} needs ${command.args}`);
  if (positionals.length > command.positionals.max) {
    const extra = positionals[command.positionals.max]!;
    throw new UsageError(
      command.positionals.max === 0
        ? `${command.name} takes no argument, got "${extra}"`
        : `unexpected argument "${extra}": ${command.name} takes ${command.args}`,
    );
  }
  if (global.local === true && global.outputs !== undefined)
    throw new UsageError('--local and --outputs name two different APIs: give one');
  return {
    options,
    global: {
      local: global.local === true,
      json: global.json === true,
      ...(typeof global.endpoint === 'string' ? { endpoint: global.endpoint } : {}),
      ...(typeof global.region === 'string' ? { region: global.region } : {}),
      ...(typeof global.outputs === 'string' ? { outputs: global.outputs } : {}),
      ...(typeof global.stack === 'string' ? { stack: global.stack } : {}),
    },
  };
}

/** ` (did you mean --x?)` for a near miss: one edit, or a prefix. */
function suggestion(name: string, candidates: readonly string[]): string {
  const near = candidates.find((c) => c.startsWith(name) || distance(c, name) <= 2);
  if (!near) return '';
  return candidates === GROUPS ? ` (did you mean ${near}?)` : ` (did you mean --${near}?)`;
}

/** Levenshtein distance, for suggestions on short names. */
function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++)
      next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

/** A whole number option, checked: `--name must be a whole number from min to max`. */
export function wholeNumber(
  options: Options,
  name: string,
  range: { readonly min: number; readonly max?: number },
): number | undefined {
  const raw = options[name];
  if (raw === undefined || typeof raw === 'boolean') return undefined;
  const n = Number(raw);
  if (
    raw.trim() === '' ||
    !Number.isInteger(n) ||
    n < range.min ||
    (range.max !== undefined && n > range.max)
  ) {
    const bounds = range.max === undefined ? `≥ ${range.min}` : `from ${range.min} to ${range.max}`;
    throw new UsageError(`--${name} must be a whole number ${bounds}, got ${JSON.stringify(raw)}`);
  }
  return n;
}

/** A number option, checked: `--name must be a number`. */
export function numberOption(options: Options, name: string): number | undefined {
  const raw = options[name];
  if (raw === undefined || typeof raw === 'boolean') return undefined;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n)) {
    throw new UsageError(`--${name} must be a number, got ${JSON.stringify(raw)}`);
  }
  return n;
}

/** A string option (the parser already refused a boolean there). */
export function stringOption(options: Options, name: string): string | undefined {
  const raw = options[name];
  return typeof raw === 'string' ? raw : undefined;
}
