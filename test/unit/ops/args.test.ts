import { describe, expect, it } from 'vitest';
import { parseCommandLine, wholeNumber } from '../../../scripts/ops/args.ts';
import { COMMANDS } from '../../../scripts/ops/commands.ts';
import { UsageError } from '../../../scripts/ops/errors.ts';

function command(argv: string[]) {
  const line = parseCommandLine(argv);
  if (line.kind !== 'command') throw new Error(`not a command: ${line.kind}`);
  return {
    name: line.command.name,
    positionals: line.positionals,
    options: line.options,
    global: line.global,
  };
}

function usageError(argv: string[]): string {
  try {
    parseCommandLine(argv);
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error(`no usage error for ${argv.join(' ')}`);
}

describe('ops command line', () => {
  it('reads the command, its positionals and options in any order, with --name value or --name=value', () => {
    expect(command(['jobs', 'show', '--client', 'acme', 'J1', '--watch', '--timeout=30'])).toEqual({
      name: 'jobs show',
      positionals: ['J1'],
      options: { client: 'acme', watch: true, timeout: '30' },
      global: { local: false, json: false },
    });
    expect(command(['--local', '--json', 'clients', 'get', 'acme'])).toEqual({
      name: 'clients get',
      positionals: ['acme'],
      options: {},
      global: { local: true, json: true },
    });
    expect(
      command([
        'jobs',
        'create',
        '--client',
        'c1',
        '--csv',
        'l.csv',
        '--message',
        '-50% today',
        '--endpoint',
        'https://x',
      ]).options.message,
    ).toBe('-50% today');
  });

  it('takes everything after -- as positionals', () => {
    expect(command(['optouts', 'lookup', '--client', 'c1', '--', '--odd', 'U1']).positionals).toEqual([
      '--odd',
      'U1',
    ]);
  });

  it('answers help for the whole CLI, a group and a command, whatever the spelling', () => {
    for (const argv of [['--help'], ['-h'], ['help']]) {
      const line = parseCommandLine(argv);
      expect(line.kind).toBe('help');
      if (line.kind === 'help') expect(line.text).toContain('Commands:');
    }
    const group = parseCommandLine(['jobs', '--help']);
    expect(group.kind === 'help' && group.text).toContain('jobs report <jobId>');
    expect(group.kind === 'help' && group.text).not.toContain('clients put');
    for (const argv of [
      ['jobs', 'create', '--help'],
      ['help', 'jobs', 'create'],
      ['jobs', 'create', '-h'],
    ]) {
      const line = parseCommandLine(argv);
      expect(line.kind === 'help' && line.text).toMatch(
        /^Usage: npm run ops -- jobs create --client ID --csv FILE \[options\]/,
      );
    }
  });

  it('has help for every command, naming each of its options', () => {
    for (const spec of COMMANDS) {
      const line = parseCommandLine([...spec.name.split(' '), '--help']);
      expect(line.kind).toBe('help');
      for (const option of Object.keys(spec.options))
        expect(line.kind === 'help' && line.text).toContain(`--${option}`);
    }
  });

  it('says in one line what is wrong with a command line', () => {
    expect(usageError([])).toBe(
      'which command? clients, jobs, optouts, suppressions (see npm run ops -- --help)',
    );
    expect(usageError(['job', 'list'])).toBe(
      'unknown command "job": use clients, jobs, optouts, suppressions (did you mean jobs?)',
    );
    expect(usageError(['jobs'])).toBe(
      'which jobs command? create, list, show, pause, resume, cancel, report',
    );
    expect(usageError(['jobs', 'lisst'])).toBe(
      'unknown command "jobs lisst": use jobs create|list|show|pause|resume|cancel|report (did you mean jobs list?)',
    );
    expect(usageError(['jobs', 'list', '--clent', 'c1'])).toBe(
      'unknown option --clent (did you mean --client?)',
    );
    expect(usageError(['jobs', 'list'])).toBe('jobs list needs --client ID');
    expect(usageError(['jobs', 'show', '--client', 'c1'])).toBe('jobs show needs <jobId>');
    expect(usageError(['jobs', 'show', '--client', 'c1', 'J1', 'J2'])).toBe(
      'unexpected argument "J2": jobs show takes <jobId>',
    );
    expect(usageError(['jobs', 'list', '--client', 'c1', '--csv', 'x.csv'])).toBe(
      'jobs list takes no --csv (see npm run ops -- jobs list --help)',
    );
    expect(usageError(['jobs', 'list', '--client'])).toBe('--client needs a value (ID)');
    expect(usageError(['jobs', 'list', '--client', '--json'])).toBe('--client needs a value (ID)');
    expect(usageError(['jobs', 'list', '--client', 'a', '--client', 'b'])).toBe('--client is given twice');
    expect(usageError(['jobs', 'list', '--client', 'a', '--json=yes'])).toBe('--json takes no value');
    expect(usageError(['jobs', 'list', '-x'])).toBe('unknown option -x');
    expect(usageError(['clients', 'get', 'a', '--local', '--outputs', 'o.json'])).toBe(
      '--local and --outputs name two different APIs: give one',
    );
  });

  it('checks whole numbers', () => {
    expect(wholeNumber({ limit: '20' }, 'limit', { min: 1, max: 100 })).toBe(20);
    expect(wholeNumber({}, 'limit', { min: 1 })).toBeUndefined();
    expect(() => wholeNumber({ limit: '2.5' }, 'limit', { min: 1, max: 100 })).toThrow(
      '--limit must be a whole number from 1 to 100, got "2.5"',
    );
    expect(() => wholeNumber({ timeout: '0' }, 'timeout', { min: 1 })).toThrow(
      '--timeout must be a whole number ≥ 1, got "0"',
    );
  });
});
