/**
 * One-click unsubscribe (RFC 8058): the keys that sign the links, and the function behind the
 * public `GET|POST /unsubscribe/{token}` route (`shared/routes.ts`; the HTTP API attaches it, with no
 * authorizer: the signed token is the authority).
 *
 * - The keys are one Secrets Manager secret, generated at the first deploy as
 *   `{"current": "k1", "k1": "<64 random characters>"}` (`shared/adapters/unsubscribe-secret.ts`
 *   describes the document and its rotation). The function may read that secret's value and
 *   nothing else of Secrets Manager; a signer (the brokers) is granted the same read by
 *   {@link EmailUnsubscribe.grantSigning}.
 * - The function writes one kind of item: a suppression entry (`SUPPRESS#{clientId}`), with
 *   UpdateItem only, and reads nothing of the table.
 */
import { CfnOutput, RemovalPolicy } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { NagSuppressions } from 'cdk-nag';
import { Construct } from 'constructs';
import {
  CURRENT_KEY_FIELD,
  UNSUBSCRIBE_BASE_URL_ENV,
  UNSUBSCRIBE_SECRET_ARN_ENV,
} from '#shared/adapters/unsubscribe-secret.ts';
import { functions } from '#shared/functions.ts';
import { tableSpec } from '#shared/resources.ts';
import { suppressionKeys } from '#shared/suppressions/model.ts';
import { SwitchboardFunction } from './function.ts';
import type { StatefulResources } from './stateful.ts';

/** The key the stack generates; later keys are added by whoever rotates. */
const FIRST_KEY_ID = 'k1';

export interface EmailUnsubscribeProps {
  readonly stage: string;
  readonly stateful: StatefulResources;
  readonly retain: boolean;
  /**
   * The links' base URL (`https://{api}/unsubscribe`, or a custom domain's): what signers put
   * before the token. Usually a lazy string: the API is built after this construct.
   */
  readonly baseUrl: string;
}

export class EmailUnsubscribe extends Construct {
  /** The `unsubscribe` function (the handler of the route). */
  readonly handler: SwitchboardFunction;
  /** The signing keys. */
  readonly keys: secretsmanager.Secret;
  readonly baseUrl: string;

  constructor(scope: Construct, id: string, props: EmailUnsubscribeProps) {
    super(scope, id);
    this.baseUrl = props.baseUrl;
    const removalPolicy = props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;
    this.keys = new secretsmanager.Secret(this, 'Keys', {
      description: `Switchboard ${props.stage}: the keys that sign one-click unsubscribe links (JSON: "${CURRENT_KEY_FIELD}" names the signing key; every other property is a key by its id)`,
      generateSecretString: {
        secretStringTemplate: JSON.stringify({ [CURRENT_KEY_FIELD]: FIRST_KEY_ID }),
        generateStringKey: FIRST_KEY_ID,
        // 64 letters and digits: about 380 bits, twice HMAC-SHA256's 256.
        passwordLength: 64,
        excludePunctuation: true,
      },
      removalPolicy,
    });
    this.handler = new SwitchboardFunction(this, 'Function', {
      spec: functions.unsubscribe,
      logRemovalPolicy: removalPolicy,
      environment: { [UNSUBSCRIBE_SECRET_ARN_ENV]: this.keys.secretArn },
    }).bindTable(props.stateful.tables.control, 'readwrite', tableSpec('control').envVar, {
      reads: { actions: [] },
      writes: { actions: ['dynamodb:UpdateItem'], leadingKeys: [`${suppressionKeys.pk('')}*`] },
    });
    this.grantSigning(this.handler);

    new CfnOutput(this, 'BaseUrl', {
      key: 'UnsubscribeBaseUrl',
      description:
        "Where one-click unsubscribe links point (an email's List-Unsubscribe is this, '/' and a token)",
      value: props.baseUrl,
    });
    NagSuppressions.addResourceSuppressions(this.keys, [
      {
        id: 'AwsSolutions-SMG4',
        reason:
          'Links must keep working long after their email was sent (CAN-SPAM: 30 days at least), so a rotation adds a key and makes it current while the old key stays; Secrets Manager rotation replaces the value on a schedule. Rotation is by key id, done with put-secret-value (docs/email.md).',
      },
    ]);
  }

  /**
   * Lets `grantee` (the function; a signer such as the brokers' task role) read the keys: their
   * current value, nothing else (`grantRead` would add DescribeSecret, which no reader calls).
   */
  grantSigning(grantee: iam.IGrantable): void {
    iam.Grant.addToPrincipal({
      grantee,
      actions: ['secretsmanager:GetSecretValue'],
      resourceArns: [this.keys.secretArn],
    });
  }

  /** A signer's settings: the keys' ARN and the links' base URL. */
  signerEnvironment(): Record<string, string> {
    return { [UNSUBSCRIBE_SECRET_ARN_ENV]: this.keys.secretArn, [UNSUBSCRIBE_BASE_URL_ENV]: this.baseUrl };
  }
}
