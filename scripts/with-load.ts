/**
 * Runs a command beside a CPU load, so that timing assumptions in tests are found before a user
 * does (issue 35 #9): `npm run test:e2e -- --load 8` runs the drills with 8 busy processes beside
 * them (on two cores, a load average near 10). Without `--load`, the command runs alone.
 *
 * Usage: node scripts/with-load.ts [--load N] -- command [args…] (`--load N` may also come after
 * the command's own arguments, where `npm run x -- --load N` puts it). The busy processes end
 * with the command, or after an hour whatever happens.
 */
import { type ChildProcess, spawn } from 'node:child_process';

const MAX_LOAD_MS = 3_600_000;

function parse(argv: readonly string[]): { load: number; command: string[] } {
  const args = [...argv];
  const dashes = args.indexOf('--');
  const before = dashes >= 0 ? args.slice(0, dashes) : [];
  const command = dashes >= 0 ? args.slice(dashes + 1) : args;
  let load = 0;
  for (const list of [before, command]) {
    const at = list.indexOf('--load');
    if (at < 0) continue;
    load = Number(list[at + 1]);
    if (!Number.isInteger(load) || load < 0 || load > 64) {
      throw new Error(
        `--load must be a whole number of busy processes from 0 to 64, got ${JSON.stringify(list[at + 1])}`,
      );
    }
    list.splice(at, 2);
  }
  if (command.length === 0) throw new Error('usage: node scripts/with-load.ts [--load N] -- command [args…]');
  return { load, command };
}

/** A process that keeps one core busy until it is killed, or for an hour at most. */
function busy(): ChildProcess {
  return spawn(
    process.execPath,
    ['-e', `const end = Date.now() + ${MAX_LOAD_MS}; while (Date.now() < end) {}`],
    {
      stdio: 'ignore',
    },
  );
}

const { load, command } = parse(process.argv.slice(2));
const spinners = Array.from({ length: load }, busy);
if (load > 0) console.log(`[with-load] ${load} busy processes beside: ${command.join(' ')}`);
const stopSpinners = () => {
  for (const spinner of spinners) spinner.kill('SIGKILL');
};
const child = spawn(command[0]!, command.slice(1), { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    child.kill(signal);
    stopSpinners();
  });
}
child.on('error', (error) => {
  stopSpinners();
  console.error(`[with-load] ${command[0]}: ${error.message}`);
  process.exit(1);
});
child.on('close', (code, signal) => {
  stopSpinners();
  process.exit(code ?? (signal ? 1 : 0));
});
