/**
 * Amazon Connect's contact events into Switchboard: an EventBridge rule on the default bus
 * (`source: aws.connect`, `detail-type: Amazon Connect Contact Event`, the configured instances,
 * the three event types that move a call) targets the connect-events function, which settles the
 * call through the same path as a signed callback and nudges the broker holding the client. Like
 * call-status it runs in the brokers' VPC for that nudge. EventBridge delivery is best effort: the
 * target retries for an hour, and the broker's reconciliation (`DescribeContact`) covers the rest.
 *
 * A second rule sends each `DISCONNECTED` event to connect-opt-outs, which reads the contact's
 * attributes (`GetContactAttributes`: contact events carry none) and puts a recipient who asked to
 * opt out on the suppression list. It is a function of its own, outside the VPC: the VPC has no
 * NAT and no endpoint for Amazon Connect's API, and it nudges nobody.
 */
import { Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import { NagSuppressions } from 'cdk-nag';
import { Construct } from 'constructs';
import { functions } from '#shared/functions.ts';
import { tableSpec } from '#shared/resources.ts';
import { CONNECT_EVENT_RULES } from '#shared/telephony/connect-contact.ts';
import type { BrokerFleet } from './broker-fleet.ts';
import { SwitchboardFunction } from './function.ts';
import { settlingFunction } from './settling-function.ts';
import type { StatefulResources } from './stateful.ts';

export interface ConnectEventsProps {
  readonly stateful: StatefulResources;
  readonly fleet: BrokerFleet;
  readonly retain: boolean;
  readonly instanceIds: readonly string[];
}

export class ConnectEvents extends Construct {
  readonly handler: SwitchboardFunction;
  readonly rule: events.Rule;
  readonly optOuts: SwitchboardFunction;
  readonly optOutRule: events.Rule;

  constructor(scope: Construct, id: string, props: ConnectEventsProps) {
    super(scope, id);
    const stack = Stack.of(this);
    this.handler = settlingFunction(this, {
      spec: functions['connect-events'],
      stateful: props.stateful,
      fleet: props.fleet,
      retain: props.retain,
      description: 'Switchboard connect-events: HTTPS to DynamoDB, nudges to brokers',
    });
    const instanceArns = props.instanceIds.map((instanceId) =>
      stack.formatArn({ service: 'connect', resource: 'instance', resourceName: instanceId }),
    );
    this.rule = new events.Rule(this, 'ContactEvents', {
      description: 'Amazon Connect contact events of the configured instances → connect-events',
      eventPattern: {
        source: ['aws.connect'],
        detailType: ['Amazon Connect Contact Event'],
        detail: {
          instanceArn: instanceArns,
          ...CONNECT_EVENT_RULES['connect-events'],
        },
      },
      targets: [
        new targets.LambdaFunction(this.handler, { retryAttempts: 8, maxEventAge: Duration.hours(1) }),
      ],
    });

    this.optOuts = new SwitchboardFunction(this, 'OptOuts', {
      spec: functions['connect-opt-outs'],
      logRemovalPolicy: props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    })
      // The suppression entry only (an UpdateItem under SUPPRESS#); no read of the control table.
      .bindTable(props.stateful.tables.control, 'readwrite', tableSpec('control').envVar, {
        reads: { actions: [] },
        writes: { actions: ['dynamodb:UpdateItem'], leadingKeys: ['SUPPRESS#*'] },
      })
      // The task the contact's attributes name, for its recipient.
      .bindTable(props.stateful.tables.tasks, 'read', tableSpec('tasks').envVar, {
        reads: { actions: ['dynamodb:GetItem'] },
      });
    this.optOuts.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['connect:GetContactAttributes'],
        resources: props.instanceIds.map((id) =>
          stack.formatArn({ service: 'connect', resource: 'instance', resourceName: `${id}/contact/*` }),
        ),
      }),
    );
    NagSuppressions.addResourceSuppressions(
      this.optOuts.role!,
      [
        {
          id: 'AwsSolutions-IAM5',
          reason:
            "Amazon Connect contacts exist only once a call is placed: GetContactAttributes is granted on the configured instances' contacts (instance/{id}/contact/*), the narrowest ARN IAM allows.",
          appliesTo: [
            {
              regex:
                '/^Resource::arn:<AWS::Partition>:connect:<AWS::Region>:<AWS::AccountId>:instance\\/[0-9a-f-]+\\/contact\\/\\*$/g',
            },
          ],
        },
      ],
      true,
    );
    this.optOutRule = new events.Rule(this, 'ContactEnds', {
      description: 'Amazon Connect contacts ended, of the configured instances → connect-opt-outs',
      eventPattern: {
        source: ['aws.connect'],
        detailType: ['Amazon Connect Contact Event'],
        detail: { instanceArn: instanceArns, ...CONNECT_EVENT_RULES['connect-opt-outs'] },
      },
      targets: [
        new targets.LambdaFunction(this.optOuts, { retryAttempts: 8, maxEventAge: Duration.hours(1) }),
      ],
    });
  }
}
