/**
 * The record of AWS calls the IAM conformance check reads. While the integration and e2e suites
 * run, every SDK call made by a Lambda handler (inside `invokeHandler`, which names the function)
 * or by a broker process becomes IAM authorization requests (`./requests.ts`), written once per
 * distinct shape to `{dir}/{pid}.jsonl`. Written as they happen, not at exit: brokers are killed
 * with SIGKILL in the drills.
 *
 * The principal is the function that made the call, as AWS knows it from the role's credentials:
 * locally every handler shares one process, so the function is carried by an AsyncLocalStorage
 * set around each invocation.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { appendFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type AwsClientPlugin, onEveryAwsClient } from '#shared/adapters/aws-client-hooks.ts';
import { type IamRequest, iamRequestsOf, REGION } from './requests.ts';

/** The function (or `broker`) on whose behalf the current async context calls AWS. */
export const awsPrincipal = new AsyncLocalStorage<string>();

/** One line of the record. */
export interface RecordedCall extends IamRequest {
  readonly principal: string;
  /** The SDK operation that asked, e.g. `DynamoDB.TransactWriteItems`. */
  readonly via: string;
}

/** The environment variable that turns recording on in a broker started with {@link brokerRecording}. */
export const AWS_CALL_LOG_ENV = 'SWITCHBOARD_AWS_CALL_LOG';

let recordingDir: string | undefined;

/** A key value reduced to its shape (`LEASE#acme` → `LEASE#*`), so a record holds each shape once. */
function shapeOf(value: string): string {
  return value
    .split('#')
    .map((part) => (/^[A-Z_]+$|^[a-z]+$/.test(part) ? part : '*'))
    .join('#');
}

function shapeKey(call: RecordedCall): string {
  const context = Object.entries(call.context)
    .map(
      ([k, v]) =>
        `${k}=${(Array.isArray(v) ? v : [v])
          .map((x) => shapeOf(String(x)))
          .sort()
          .join(',')}`,
    )
    .join(';');
  return `${call.principal}|${call.action}|${call.resource.replace(/\/(uploads|incoming|state|reports)\/.*$/, '/$1/*')}|${context}`;
}

/**
 * Starts recording every call of clients built from now on (`#shared/adapters/aws-clients.ts`).
 * `principal` fixes who calls (a broker process); otherwise it is read from {@link awsPrincipal}
 * and calls made outside any function (test set-up, the harness) are not recorded.
 */
export function startAwsCallLog(options: { dir: string; principal?: string }): () => void {
  mkdirSync(options.dir, { recursive: true });
  recordingDir = options.dir;
  const file = path.join(options.dir, `${process.pid}.jsonl`);
  const seen = new Set<string>();
  const record = (
    principal: string,
    clientName: string,
    commandName: string,
    input: Record<string, unknown>,
    region: string | undefined,
  ) => {
    const service = clientName.replace(/Client$/, '');
    for (const request of iamRequestsOf(clientName, commandName, input, regionPart(region))) {
      const call: RecordedCall = {
        principal,
        via: `${service}.${commandName.replace(/Command$/, '')}`,
        ...request,
      };
      const key = shapeKey(call);
      if (seen.has(key)) continue;
      seen.add(key);
      appendFileSync(file, `${JSON.stringify(call)}\n`);
    }
  };
  const plugin: AwsClientPlugin = {
    applyToStack(stack, config) {
      (stack as unknown as { add: (mw: unknown, options: unknown) => void }).add(
        (next: (args: unknown) => Promise<unknown>, context: { clientName?: string; commandName?: string }) =>
          async (args: { input?: Record<string, unknown> }) => {
            const principal = options.principal ?? awsPrincipal.getStore();
            if (principal && context.clientName && context.commandName) {
              const region = typeof config?.region === 'function' ? await config.region() : config?.region;
              record(principal, context.clientName, context.commandName, args.input ?? {}, region);
            }
            return next(args);
          },
        // After serialisation: the input is what is sent (a document client's input marshalled).
        { step: 'build', name: 'switchboardAwsCallLog' },
      );
    },
  };
  const stop = onEveryAwsClient(plugin);
  return () => {
    stop();
    recordingDir = undefined;
  };
}

/**
 * The region part of a recorded ARN: {@link REGION} for the deployment's own region (the process's
 * `AWS_REGION`, which the template's `${AWS::Region}` becomes too), the region itself for any other
 * (a client built for another region asks IAM about resources there, which the template may not grant).
 */
function regionPart(region: string | undefined): string {
  return region === undefined || region === process.env.AWS_REGION ? REGION : region;
}

/**
 * How to start a broker process so that it records too: a preload and the directory. Empty when
 * this process does not record (`npm start`).
 */
export function brokerRecording(): { execArgv: string[]; env: Record<string, string> } {
  if (!recordingDir) return { execArgv: [], env: {} };
  const preload = fileURLToPath(new URL('./record-broker-calls.ts', import.meta.url));
  return { execArgv: ['--import', preload], env: { [AWS_CALL_LOG_ENV]: recordingDir } };
}
