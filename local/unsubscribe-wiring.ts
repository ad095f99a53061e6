/**
 * One-click unsubscribe on the local cloud: the `unsubscribe` function behind its route on the API
 * Gateway stand-in, and the keys it verifies with. In AWS the keys are a Secrets Manager secret
 * (`cdk/constructs/email-unsubscribe.ts`); here they are a fixed development document handed over
 * in `UNSUBSCRIBE_KEYS`, to the function and to the brokers (which sign), so both agree and a link
 * signed in a test or a demo opens on `npm start`.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { APIGatewayProxyEventV2, APIGatewayProxyResultV2 } from 'aws-lambda';
import {
  UNSUBSCRIBE_BASE_URL_ENV,
  UNSUBSCRIBE_KEYS_ENV,
  unsubscribeTokensFrom,
  unsubscribeUrl,
} from '#shared/adapters/unsubscribe-secret.ts';
import type { UnsubscribeRequest, UnsubscribeTokens } from '#shared/email/unsubscribe.ts';
import { functions } from '#shared/functions.ts';
import { UNSUBSCRIBE_BASE_PATH } from '#shared/routes.ts';
import type { HttpFunction } from './api-gateway.ts';
import type { Handler } from './lambda.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

/** The local cloud's keys: not a secret (it is in the repository), never used in AWS. */
export const LOCAL_UNSUBSCRIBE_KEYS = JSON.stringify({
  current: 'local1',
  local1: 'switchboard-local-unsubscribe-key-0123456789abcdef',
});

/** The environment of the function (`apiUrl` unknown yet) or of a broker: the keys, and where links point. */
export function localUnsubscribeEnv(apiUrl?: string): Record<string, string> {
  return {
    [UNSUBSCRIBE_KEYS_ENV]: LOCAL_UNSUBSCRIBE_KEYS,
    ...(apiUrl === undefined ? {} : { [UNSUBSCRIBE_BASE_URL_ENV]: localUnsubscribeBaseUrl(apiUrl) }),
  };
}

/** Where the local API's unsubscribe links point: `{apiUrl}/unsubscribe`. */
export function localUnsubscribeBaseUrl(apiUrl: string): string {
  return `${apiUrl}${UNSUBSCRIBE_BASE_PATH}`;
}

/**
 * The deployed handler module (`lambdas/unsubscribe/main.ts`), for the API Gateway stand-in's
 * `functions`. Import it after {@link localUnsubscribeEnv} is in `process.env`: it reads its keys at start.
 */
export async function unsubscribeHttpFunction(): Promise<HttpFunction> {
  const spec = functions.unsubscribe;
  const module = (await import(pathToFileURL(path.join(ROOT, spec.entry)).href)) as {
    handler: Handler<APIGatewayProxyEventV2, APIGatewayProxyResultV2>;
  };
  return { handler: module.handler, timeoutMs: spec.timeoutSeconds * 1000 };
}

/** Signs links as a broker does on the local cloud: what tests and the demo open or POST to. */
export class LocalUnsubscribeLinks {
  readonly baseUrl: string;
  readonly #tokens: UnsubscribeTokens;

  constructor(apiUrl: string, clock: { now(): number }) {
    this.baseUrl = localUnsubscribeBaseUrl(apiUrl);
    this.#tokens = unsubscribeTokensFrom(LOCAL_UNSUBSCRIBE_KEYS, { clock });
  }

  /** The link of one recipient of one job. */
  link(request: UnsubscribeRequest): string {
    return unsubscribeUrl(this.baseUrl, this.#tokens.sign(request));
  }
}
