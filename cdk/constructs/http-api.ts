/**
 * Switchboard's HTTP API (API Gateway v2). Its routes are the route table in `shared/routes.ts`,
 * the same table the local API Gateway stand-in serves, so what runs locally is what is deployed.
 */
import { CfnOutput, Duration, RemovalPolicy } from 'aws-cdk-lib';
import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';
import * as apigw from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sns from 'aws-cdk-lib/aws-sns';
import { NagSuppressions } from 'cdk-nag';
import { Construct } from 'constructs';
import { resourceName } from '#shared/resources.ts';
import { type HttpFunctionId, type RouteSpec, routeKey, routes as sharedRoutes } from '#shared/routes.ts';
import { alarmOnAny } from './stateful.ts';

export interface SwitchboardHttpApiProps {
  readonly stage: string;
  /** The Lambda behind each function id the route table names. */
  readonly handlers: Readonly<Record<HttpFunctionId, lambda.IFunction>>;
  /** Where the API's alarms notify. */
  readonly alarmTopic: sns.ITopic;
  /** Steady requests per second and burst for every route. Default: 1,000/s, burst 2,000. */
  readonly throttle?: { readonly rateLimit: number; readonly burstLimit: number };
  /** Default: the shared route table. */
  readonly routes?: readonly RouteSpec[];
  /** The authorizer of `auth: 'jwt'` routes (the console's user pool). */
  readonly jwtAuthorizer: apigw.IHttpRouteAuthorizer;
  /** What happens to the access-log group when the stack is deleted. Default: retained. */
  readonly logRemovalPolicy?: RemovalPolicy;
}

// One JSON object per request: what Logs Insights queries. No headers, no body: a webhook's
// body is a customer's message, and its signature header is a credential.
// No `$context.path`: a path can be a credential (the signed token of /unsubscribe/{token}, which
// names an address) and access logs are read more widely than the data; `routeKey` names the route.
const ACCESS_LOG_FIELDS = {
  requestId: '$context.requestId',
  requestTime: '$context.requestTimeEpoch',
  routeKey: '$context.routeKey',
  httpMethod: '$context.httpMethod',
  protocol: '$context.protocol',
  status: '$context.status',
  responseLength: '$context.responseLength',
  responseLatency: '$context.responseLatency',
  integrationStatus: '$context.integrationStatus',
  integrationLatency: '$context.integrationLatency',
  integrationError: '$context.integrationErrorMessage',
  error: '$context.error.message',
  sourceIp: '$context.identity.sourceIp',
  userAgent: '$context.identity.userAgent',
};

// Why a route is open at the gateway, per function. A new `auth: 'none'` route whose function is
// not listed here stays flagged by cdk-nag (AwsSolutions-APIG4) until its reason is written down.
const PUBLIC_ROUTE_REASONS: Partial<Record<HttpFunctionId, string>> = {
  'webhook-receiver':
    "called by LINE's webhook delivery, which cannot sign with SigV4 or present a token; every request is authenticated in the handler by the x-line-signature HMAC-SHA256 of the raw body under the channel secret, and rejected with 401 before anything is stored.",
  console:
    "the console's page, script, stylesheet and font: static files that hold no data, loaded before anyone signs in; every read or change of data is a /console/api route behind the JWT authorizer.",
  unsubscribe:
    "an email's one-click unsubscribe link (RFC 8058): the recipient's mail provider POSTs to it, and the recipient opens it in a browser, neither with any credential (RFC 8058 §3.1: the URI itself must identify the recipient); every request is authenticated in the handler by the token in the path (HMAC-SHA256 under the keys in Secrets Manager), and a token that does not verify is refused with 404 before anything is written; GET never writes.",
  'call-status':
    'called by the telephony provider, which cannot sign with SigV4; every callback is authenticated in the handler by its X-Switchboard-Signature (HMAC-SHA256 over timestamp and raw body, 5-minute replay window) and rejected with 401 before anything is changed.',
};

/**
 * The HTTP API: one Lambda proxy integration (payload format 2.0) per function, a route per
 * entry of the route table (`auth: 'iam'` routes need SigV4), a `$default` stage that deploys
 * itself, throttles every route and writes JSON access logs, and an alarm on 5xx answers.
 */
export class SwitchboardHttpApi extends Construct {
  readonly api: apigw.HttpApi;
  readonly stage: apigw.HttpStage;
  readonly accessLogs: logs.LogGroup;
  /** Fires when the API answers any 5xx (a Lambda error, timeout or a handler's 500). */
  readonly serverErrorsAlarm: cloudwatch.Alarm;

  constructor(scope: Construct, id: string, props: SwitchboardHttpApiProps) {
    super(scope, id);
    const throttle = props.throttle ?? { rateLimit: 1_000, burstLimit: 2_000 };

    this.api = new apigw.HttpApi(this, 'HttpApi', {
      apiName: resourceName(props.stage, 'api'),
      description: 'Switchboard: LINE webhooks and operator calls',
      createDefaultStage: false,
    });

    this.accessLogs = new logs.LogGroup(this, 'AccessLogs', {
      retention: logs.RetentionDays.ONE_MONTH,
      removalPolicy: props.logRemovalPolicy ?? RemovalPolicy.RETAIN,
    });
    this.stage = new apigw.HttpStage(this, 'DefaultStage', {
      httpApi: this.api,
      stageName: '$default',
      autoDeploy: true,
      throttle,
      accessLogSettings: {
        destination: new apigw.LogGroupLogDestination(this.accessLogs),
        format: AccessLogFormat.custom(JSON.stringify(ACCESS_LOG_FIELDS)),
      },
    });

    const integrations = new Map<HttpFunctionId, HttpLambdaIntegration>();
    const integrationFor = (functionId: HttpFunctionId): HttpLambdaIntegration => {
      let integration = integrations.get(functionId);
      if (!integration) {
        integration = new HttpLambdaIntegration(`${functionId}-integration`, props.handlers[functionId], {
          payloadFormatVersion: apigw.PayloadFormatVersion.VERSION_2_0,
        });
        integrations.set(functionId, integration);
      }
      return integration;
    };

    for (const route of props.routes ?? sharedRoutes) {
      const [httpRoute] = this.api.addRoutes({
        path: route.path,
        methods: [apigw.HttpMethod[route.method]],
        integration: integrationFor(route.functionId),
        ...(route.auth === 'iam' ? { authorizer: new HttpIamAuthorizer() } : {}),
        ...(route.auth === 'jwt' ? { authorizer: props.jwtAuthorizer } : {}),
      });
      const publicBecause = PUBLIC_ROUTE_REASONS[route.functionId];
      if (route.auth === 'none' && httpRoute && publicBecause) {
        NagSuppressions.addResourceSuppressions(httpRoute, [
          { id: 'AwsSolutions-APIG4', reason: `${routeKey(route)}: ${publicBecause}` },
        ]);
      }
    }

    this.serverErrorsAlarm = alarmOnAny(
      this,
      'ServerErrors',
      this.api.metricServerError({ period: Duration.minutes(5), statistic: cloudwatch.Stats.SUM }),
      {
        alarmName: resourceName(props.stage, 'api-5xx'),
        description:
          'The HTTP API answered 5xx: LINE counts these as failed deliveries and may never redeliver. Check the receiver logs.',
        topic: props.alarmTopic,
      },
    );

    new CfnOutput(this, 'Url', {
      key: 'HttpApiUrl',
      description: 'Base URL of the Switchboard HTTP API ($default stage)',
      value: this.api.apiEndpoint,
    });
    new CfnOutput(this, 'ConsoleUrl', {
      key: 'ConsoleUrl',
      description: 'The operator console: sign in with a user of the console user pool',
      value: `${this.api.apiEndpoint}/console`,
    });
  }

  /** The full URL of a route path, e.g. `https://{id}.execute-api.{region}.amazonaws.com/webhooks/line/{channelId}`. */
  urlOf(path: string): string {
    return `${this.api.apiEndpoint}${path}`;
  }
}
