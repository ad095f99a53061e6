/**
 * The operator console: who may sign in (a Cognito user pool, one app client, the `admins` group;
 * a group `client:{clientId}:{role}` per client and role, which an administrator creates with the CLI of AWS),
 * and the console's files, served by a function behind the HTTP API's public `GET /console`
 * routes. The console's API calls go to `/console/api/…`, behind the JWT authorizer that trusts
 * this pool's app client (`jwtAuthorizer`).
 *
 * Why the HTTP API serves the files rather than S3 behind CloudFront: the console and its API
 * then share one origin, so no CORS rule stands between them and the token never leaves that
 * origin; the page is deployed in the same step as the API it calls (no BucketDeployment custom
 * resource, no second distribution to secure); and `npm start` serves it through the very same
 * function. The cost is a Lambda invocation per file on a cold browser cache (every file but the
 * page is content-hashed and cached for a year): nothing for a console of a few operators.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CfnOutput, Duration, RemovalPolicy } from 'aws-cdk-lib';
import { HttpJwtAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import * as cognito from 'aws-cdk-lib/aws-cognito';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { NagSuppressions } from 'cdk-nag';
import { Construct } from 'constructs';
import { buildConsole } from '#console/build.ts';
import { functions } from '#shared/functions.ts';
import { ADMINS_GROUP } from '#shared/operators/tenancy.ts';
import { resourceName } from '#shared/resources.ts';
import { SwitchboardFunction } from './function.ts';

export interface OperatorConsoleProps {
  readonly stage: string;
  /** Keep the user pool and log groups when the stack is deleted (production: yes). */
  readonly retain: boolean;
}

export class OperatorConsole extends Construct {
  readonly userPool: cognito.UserPool;
  readonly appClient: cognito.UserPoolClient;
  /** Serves the console's files: pass it to the HTTP API as `handlers.console`. */
  readonly files: SwitchboardFunction;
  /** Verifies the console's tokens on the `jwt` routes. */
  readonly jwtAuthorizer: HttpJwtAuthorizer;

  constructor(scope: Construct, id: string, props: OperatorConsoleProps) {
    super(scope, id);
    const removalPolicy = props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;
    this.userPool = new cognito.UserPool(this, 'Users', {
      userPoolName: resourceName(props.stage, 'operators'),
      // Operators are invited by an administrator; nobody signs up.
      selfSignUpEnabled: false,
      signInAliases: { username: true, email: true },
      signInCaseSensitive: false,
      passwordPolicy: {
        minLength: 12,
        requireLowercase: true,
        requireUppercase: true,
        requireDigits: true,
        requireSymbols: true,
        tempPasswordValidity: Duration.days(3),
      },
      accountRecovery: cognito.AccountRecovery.EMAIL_ONLY,
      deletionProtection: props.retain,
      removalPolicy,
    });
    this.appClient = this.userPool.addClient('Console', {
      userPoolClientName: 'console',
      generateSecret: false,
      authFlows: { userPassword: true, userSrp: true },
      preventUserExistenceErrors: true,
      accessTokenValidity: Duration.hours(1),
      idTokenValidity: Duration.hours(1),
      refreshTokenValidity: Duration.days(30),
      enableTokenRevocation: true,
    });
    new cognito.CfnUserPoolGroup(this, 'Admins', {
      userPoolId: this.userPool.userPoolId,
      groupName: ADMINS_GROUP,
      description: 'Administrators of this Switchboard: every client, and new ones',
    });
    NagSuppressions.addResourceSuppressions(this.userPool, [
      {
        id: 'AwsSolutions-COG2',
        reason:
          'MFA is not required yet: the console signs in with USER_PASSWORD_AUTH and does not answer the SOFTWARE_TOKEN_MFA challenge; operators are few and invited, passwords follow a 12-character policy (see docs/console.md, "Sign-in and tenancy").',
      },
      {
        id: 'AwsSolutions-COG3',
        reason:
          'Threat protection (advanced security) needs the Cognito Plus feature plan, priced per active user; left to the operator to enable for a pool of a few invited operators.',
      },
      {
        id: 'AwsSolutions-COG8',
        reason:
          'The Essentials plan: the Plus plan (threat protection, compromised-credential checks) is priced per monthly active user and left to the operator; sign-up is closed and users are invited.',
      },
    ]);

    const filesDir = mkdtempSync(path.join(os.tmpdir(), 'switchboard-console-layer-'));
    buildConsole(path.join(filesDir, 'console'));
    this.files = new SwitchboardFunction(this, 'Files', {
      spec: functions.console,
      logRemovalPolicy: removalPolicy,
      environment: {
        // A layer's files are under /opt.
        CONSOLE_FILES_DIR: '/opt/console',
        USER_POOL_ID: this.userPool.userPoolId,
        USER_POOL_CLIENT_ID: this.appClient.userPoolClientId,
      },
    });
    this.files.addLayers(
      new lambda.LayerVersion(this, 'FilesLayer', {
        code: lambda.Code.fromAsset(filesDir),
        description: 'Switchboard console: the page, its script, stylesheet and font',
        compatibleArchitectures: [lambda.Architecture.ARM_64],
      }),
    );
    this.jwtAuthorizer = new HttpJwtAuthorizer(
      'ConsoleUsers',
      `https://cognito-idp.${this.userPool.stack.region}.amazonaws.com/${this.userPool.userPoolId}`,
      { jwtAudience: [this.appClient.userPoolClientId] },
    );

    new CfnOutput(this, 'UserPoolId', {
      key: 'ConsoleUserPoolId',
      description: 'The console users pool: create users and client:{clientId}:{role} groups in it',
      value: this.userPool.userPoolId,
    });
  }
}
