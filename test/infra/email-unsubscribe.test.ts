/**
 * One-click unsubscribe as deployed (`cdk/constructs/email-unsubscribe.ts`): the public route with
 * no authorizer, the function and the environment its main.ts requires, the signing keys' secret
 * (generated, readable by this function and no other role), the function's table access (suppression
 * entries, UpdateItem only), the base URL output, and cdk-nag on the construct.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, type CfnResource } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { IConstruct } from 'constructs';
import { describe, expect, it } from 'vitest';
import { buildApp } from '#cdk/app.ts';
import { REPO_ROOT } from '#cdk/constructs/function.ts';
import { type CfnTemplate, checkConformance } from '#local/iam/policy.ts';
import type { RecordedCall } from '#local/iam/recorder.ts';
import { UNSUBSCRIBE_SECRET_ARN_ENV } from '#shared/adapters/unsubscribe-secret.ts';
import { functions } from '#shared/functions.ts';
import { UNSUBSCRIBE_PATH } from '#shared/routes.ts';
import { synthesizer } from '../support/synth.ts';

type Json = Record<string, unknown>;
interface Statement {
  Effect: string;
  Action: string | string[];
  Resource: unknown;
  Condition?: Json;
}

const synthesize = synthesizer('email-unsubscribe', {
  stage: 'dev',
  telephonyApiUrl: 'https://api.telephony.test',
});
const { stack, template } = synthesize({});
const resources = template.toJSON().Resources as Record<string, { Type: string; Properties: Json }>;
const unsubscribe = stack.emailUnsubscribe;

const idOf = (construct: IConstruct): string =>
  stack.getLogicalId((construct.node.defaultChild ?? construct) as CfnResource);
const propsOf = (construct: IConstruct): Json => resources[idOf(construct)]!.Properties;
const ofType = (type: string) => Object.entries(resources).filter(([, r]) => r.Type === type);
const actionsOf = (s: Statement): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);

function statementsOf(roleId: string): Statement[] {
  return ofType('AWS::IAM::Policy')
    .filter(([, r]) => JSON.stringify(r.Properties.Roles).includes(`"${roleId}"`))
    .flatMap(([, r]) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
}

describe('the unsubscribe route', () => {
  it('GET and POST /unsubscribe/{token} exist on the HTTP API with no authorizer, to the unsubscribe function', () => {
    const routes = ofType('AWS::ApiGatewayV2::Route')
      .map(
        ([, r]) =>
          r.Properties as {
            RouteKey: string;
            AuthorizationType?: string;
            AuthorizerId?: unknown;
            Target: unknown;
          },
      )
      .filter((r) => r.RouteKey.endsWith(` ${UNSUBSCRIBE_PATH}`));
    expect(routes.map((r) => r.RouteKey).sort()).toEqual([
      `GET ${UNSUBSCRIBE_PATH}`,
      `POST ${UNSUBSCRIBE_PATH}`,
    ]);
    const fn = idOf(unsubscribe.handler);
    for (const route of routes) {
      expect(route.AuthorizationType ?? 'NONE', route.RouteKey).toBe('NONE');
      expect(route.AuthorizerId, route.RouteKey).toBeUndefined();
      const integrationId = JSON.stringify(route.Target).match(/"Ref":"([^"]+)"/)![1]!;
      const integration = resources[integrationId]!.Properties;
      expect(integration).toMatchObject({ IntegrationType: 'AWS_PROXY', PayloadFormatVersion: '2.0' });
      expect(JSON.stringify(integration.IntegrationUri)).toContain(`"${fn}"`);
    }
    // API Gateway may invoke the function, for these routes.
    const permissions = ofType('AWS::Lambda::Permission').filter(([, p]) =>
      JSON.stringify(p.Properties.FunctionName).includes(`"${fn}"`),
    );
    expect(permissions.length).toBeGreaterThan(0);
    for (const [, p] of permissions) expect(p.Properties.Principal).toBe('apigateway.amazonaws.com');
  });

  it('the function has its spec and every environment variable its main.ts requires at start, the keys by ARN', () => {
    const spec = functions.unsubscribe;
    const props = propsOf(unsubscribe.handler);
    expect(props).toMatchObject({
      Description: 'Switchboard unsubscribe',
      Runtime: 'nodejs24.x',
      Architectures: ['arm64'],
      Timeout: spec.timeoutSeconds,
      MemorySize: spec.memoryMb,
      TracingConfig: { Mode: 'Active' },
    });
    expect(props.VpcConfig).toBeUndefined();
    const source = readFileSync(join(REPO_ROOT, spec.entry), 'utf8');
    const required = [...source.matchAll(/getStringFromEnv\('([A-Z_]+)'\)/g)].map((m) => m[1]!);
    const env = (props.Environment as { Variables: Json }).Variables;
    expect(Object.keys(env)).toEqual(expect.arrayContaining([...required, UNSUBSCRIBE_SECRET_ARN_ENV]));
    expect(env[UNSUBSCRIBE_SECRET_ARN_ENV]).toEqual({ Ref: idOf(unsubscribe.keys) });
    // The keys themselves are never in the function's configuration.
    expect(JSON.stringify(env)).not.toMatch(/resolve:secretsmanager/);
    expect(env.UNSUBSCRIBE_KEYS).toBeUndefined();
  });

  it("outputs the links' base URL: the API's endpoint and /unsubscribe", () => {
    const { UnsubscribeBaseUrl } = template.findOutputs('UnsubscribeBaseUrl');
    const value = JSON.stringify(UnsubscribeBaseUrl?.Value);
    expect(value).toContain(idOf(stack.api.api));
    expect(value).toContain('/unsubscribe');
  });
});

describe('the signing keys', () => {
  it('are a Secrets Manager secret generated as {"current":"k1","k1":<64 letters and digits>}', () => {
    expect(propsOf(unsubscribe.keys)).toMatchObject({
      GenerateSecretString: {
        SecretStringTemplate: JSON.stringify({ current: 'k1' }),
        GenerateStringKey: 'k1',
        PasswordLength: 64,
        ExcludePunctuation: true,
      },
    });
    expect(propsOf(unsubscribe.keys).SecretString).toBeUndefined();
  });

  it('may be read by the unsubscribe function only, and only this secret: no other secret, no wildcard', () => {
    const keys = idOf(unsubscribe.keys);
    const role = idOf(unsubscribe.handler.role!);
    const secretStatements = statementsOf(role).filter((s) =>
      actionsOf(s).some((a) => a.startsWith('secretsmanager:')),
    );
    expect(secretStatements.length).toBeGreaterThan(0);
    for (const s of secretStatements) {
      expect(s.Effect).toBe('Allow');
      expect(s.Resource).toEqual({ Ref: keys });
      expect(actionsOf(s)).toEqual(['secretsmanager:GetSecretValue']);
    }
    // Nobody else reads it but the signers granted with grantSigning: the brokers' task role.
    const readers = ofType('AWS::IAM::Policy')
      .filter(([, r]) => JSON.stringify(r.Properties.PolicyDocument).includes(`{"Ref":"${keys}"}`))
      .map(([, r]) => JSON.stringify(r.Properties.Roles));
    const brokerRole = idOf(stack.fleet.taskDefinition.taskRole);
    expect(readers.sort()).toEqual(
      [JSON.stringify([{ Ref: role }]), JSON.stringify([{ Ref: brokerRole }])].sort(),
    );
  });

  it("the function's table access: UpdateItem on suppression entries of the control table, and nothing else", () => {
    const role = idOf(unsubscribe.handler.role!);
    const dynamo = statementsOf(role).filter((s) => actionsOf(s).some((a) => a.startsWith('dynamodb:')));
    expect(dynamo).toEqual([
      {
        Effect: 'Allow',
        Action: 'dynamodb:UpdateItem',
        Resource: { 'Fn::GetAtt': [idOf(stack.stateful.tables.control), 'Arn'] },
        Condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['SUPPRESS#*'] } },
      },
    ]);
    const call = (action: string, pk: string): RecordedCall => ({
      principal: 'unsubscribe',
      via: 'test',
      action,
      resource: 'arn:aws:dynamodb:REGION:ACCOUNT:table/switchboard-STAGE-control',
      context: { 'dynamodb:LeadingKeys': [pk] },
    });
    const report = checkConformance(template.toJSON() as CfnTemplate, [
      call('dynamodb:UpdateItem', 'SUPPRESS#acme'),
      call('dynamodb:UpdateItem', 'CLIENT#acme'),
      call('dynamodb:GetItem', 'SUPPRESS#acme'),
      call('dynamodb:PutItem', 'SUPPRESS#acme'),
      call('dynamodb:DeleteItem', 'SUPPRESS#acme'),
    ]);
    expect(report.unknownPrincipals).toEqual([]);
    expect(report.denied.map((d) => `${d.request.action} ${d.call.context['dynamodb:LeadingKeys']}`)).toEqual(
      [
        'dynamodb:UpdateItem CLIENT#acme',
        'dynamodb:GetItem SUPPRESS#acme',
        'dynamodb:PutItem SUPPRESS#acme',
        'dynamodb:DeleteItem SUPPRESS#acme',
      ],
    );
  });

  it('grantSigning lets a signer read the keys, and signerEnvironment names them and the base URL', () => {
    const outdir = mkdtempSync(join(tmpdir(), 'switchboard-unsubscribe-signer-'));
    try {
      const built = buildApp(
        new App({
          outdir,
          context: {
            stage: 'dev',
            telephonyApiUrl: 'https://api.telephony.test',
            'aws:cdk:bundling-stacks': [],
          },
        }),
      );
      const signer = new iam.Role(built.stack, 'Signer', {
        assumedBy: new iam.ServicePrincipal('ecs-tasks.amazonaws.com'),
      });
      built.stack.emailUnsubscribe.grantSigning(signer);
      const env = built.stack.emailUnsubscribe.signerEnvironment();
      const signed = Template.fromStack(built.stack);
      const keys = built.stack.getLogicalId(
        built.stack.emailUnsubscribe.keys.node.defaultChild as CfnResource,
      );
      signed.hasResourceProperties('AWS::IAM::Policy', {
        Roles: [{ Ref: built.stack.getLogicalId(signer.node.defaultChild as CfnResource) }],
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({
              Action: 'secretsmanager:GetSecretValue',
              Resource: { Ref: keys },
            }),
          ]),
        },
      });
      expect(Object.keys(env).sort()).toEqual(['UNSUBSCRIBE_BASE_URL', 'UNSUBSCRIBE_SECRET_ARN']);
      expect(built.stack.resolve(env.UNSUBSCRIBE_SECRET_ARN)).toEqual({ Ref: keys });
      expect(JSON.stringify(built.stack.resolve(env.UNSUBSCRIBE_BASE_URL))).toContain('/unsubscribe');
    } finally {
      rmSync(outdir, { recursive: true, force: true });
    }
  });
});

describe('cdk-nag', () => {
  it('finds nothing unsuppressed in the construct, and the suppressions say why', () => {
    const path = `/${stack.stackName}/EmailUnsubscribe/`;
    const inConstruct = (e: { id: string }) => e.id.startsWith(path);
    const errors = Annotations.fromStack(stack).findError('*', Match.stringLikeRegexp('AwsSolutions-.*'));
    const warnings = Annotations.fromStack(stack).findWarning('*', Match.stringLikeRegexp('AwsSolutions-.*'));
    expect(errors.filter(inConstruct).map((e) => `${e.id}: ${String(e.entry.data).slice(0, 160)}`)).toEqual(
      [],
    );
    expect(warnings.filter(inConstruct).map((e) => `${e.id}: ${String(e.entry.data).slice(0, 160)}`)).toEqual(
      [],
    );
    const metadata = JSON.stringify(template.toJSON().Resources[idOf(unsubscribe.keys)]);
    expect(metadata).toContain('AwsSolutions-SMG4');
    // The public routes' reason (AwsSolutions-APIG4) is written down.
    const routes = ofType('AWS::ApiGatewayV2::Route').filter(([, r]) =>
      String((r.Properties as { RouteKey: string }).RouteKey).endsWith(UNSUBSCRIBE_PATH),
    );
    for (const [id] of routes)
      expect(JSON.stringify(template.toJSON().Resources[id])).toContain('AwsSolutions-APIG4');
  });
});
