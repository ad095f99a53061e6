/**
 * Wires the console's files: read once, at start, from the folder the stack puts them in (a
 * Lambda layer in AWS, `/opt/console`; the local build under `npm start`).
 */
import { lambdaLogging } from '#shared/adapters/lambda-logging.ts';
import { getStringFromEnv } from '#shared/config.ts';
import { readConsoleFiles } from './files.ts';
import { makeConsoleHandler } from './handler.ts';

const { observe } = lambdaLogging('console');

// Set only on the local cloud, whose Cognito and S3 are emulators.
const cognitoEndpoint = process.env.COGNITO_ENDPOINT;
const storageOrigin = process.env.STORAGE_ORIGIN;

export const handler = observe(
  makeConsoleHandler({
    files: readConsoleFiles(getStringFromEnv('CONSOLE_FILES_DIR')),
    config: {
      region: getStringFromEnv('AWS_REGION'),
      userPoolId: getStringFromEnv('USER_POOL_ID'),
      userPoolClientId: getStringFromEnv('USER_POOL_CLIENT_ID'),
      ...(cognitoEndpoint ? { cognitoEndpoint } : {}),
    },
    ...(storageOrigin ? { storageOrigin } : {}),
  }),
);
