/**
 * `npm start`: the local cloud running Switchboard — DynamoDB Local, fauxqs (SQS + S3), the API
 * Gateway stand-in, the SQS pollers and the sandboxes — until Ctrl-C, which stops it cleanly.
 */
import { parseArgs } from 'node:util';
import { playWebhookDemo } from './demo.ts';
import { type LocalStack, startLocalStack } from './stack.ts';

const HELP = `Usage: npm start -- [options]

Runs Switchboard on your machine: the same handlers AWS runs, against DynamoDB Local and fauxqs.

Options:
  --data-dir DIR   keep DynamoDB data in DIR between runs (default: in memory)
  --port N         serve the HTTP API on port N (default: 3000; 0 picks a free port)
  --no-demo        do not play the demo webhooks (the demo channel is still created)
  --exit-after S   stop by itself after S seconds (for scripts and CI)
  -h, --help       show this help
`;

async function main(): Promise<void> {
  let values: {
    'data-dir'?: string;
    port?: string;
    'no-demo'?: boolean;
    'exit-after'?: string;
    help?: boolean;
  };
  try {
    ({ values } = parseArgs({
      options: {
        'data-dir': { type: 'string' },
        port: { type: 'string' },
        'no-demo': { type: 'boolean' },
        'exit-after': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }));
  } catch (error) {
    console.error(`${(error as Error).message}\n\n${HELP}`);
    process.exitCode = 2;
    return;
  }
  if (values.help) {
    console.log(HELP);
    return;
  }
  const port = values.port === undefined ? 3000 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`--port must be a port number, got ${JSON.stringify(values.port)}`);
    process.exitCode = 2;
    return;
  }
  const exitAfter = values['exit-after'] === undefined ? undefined : Number(values['exit-after']);
  if (exitAfter !== undefined && !(exitAfter > 0)) {
    console.error(
      `--exit-after must be a positive number of seconds, got ${JSON.stringify(values['exit-after'])}`,
    );
    process.exitCode = 2;
    return;
  }

  const log = (line: string) => console.log(`[switchboard] ${line}`);
  let stack: LocalStack;
  try {
    stack = await startLocalStack({
      ...(values['data-dir'] ? { dataDir: values['data-dir'] } : {}),
      port,
      log,
    });
  } catch (error) {
    console.error(`[switchboard] could not start: ${(error as Error).message}`);
    process.exitCode = 1;
    return;
  }

  let stopping = false;
  const stop = async (why: string) => {
    if (stopping) return;
    stopping = true;
    log(`${why}: stopping…`);
    await stack.stop();
    log('stopped cleanly');
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('Ctrl-C'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  if (exitAfter !== undefined) setTimeout(() => void stop(`--exit-after ${exitAfter}s`), exitAfter * 1000);
  log(`demo channel "demo": webhook URL ${stack.webhookUrl('demo')}, channel secret "demo-channel-secret"`);
  if (!values['no-demo']) {
    await playWebhookDemo(stack, log).catch((error: unknown) =>
      log(`demo failed: ${(error as Error).message}`),
    );
  }
  log('ready — press Ctrl-C to stop');
}

await main();
