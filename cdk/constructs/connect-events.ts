/**
 * Amazon Connect's contact events into Switchboard: an EventBridge rule on the default bus
 * (`source: aws.connect`, `detail-type: Amazon Connect Contact Event`, the configured instances,
 * the three event types that move a call) targets the connect-events function, which settles the
 * call through the same path as a signed callback and nudges the broker holding the client. Like
 * call-status it runs in the brokers' VPC for that nudge. EventBridge delivery is best effort: the
 * target retries for an hour, and the broker's reconciliation (`DescribeContact`) covers the rest.
 */
import { Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import { Construct } from 'constructs';
import { functions } from '#shared/functions.ts';
import { tableSpec } from '#shared/resources.ts';
import type { BrokerFleet } from './broker-fleet.ts';
import { SwitchboardFunction } from './function.ts';
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

  constructor(scope: Construct, id: string, props: ConnectEventsProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const securityGroup = new ec2.SecurityGroup(this, 'SecurityGroup', {
      vpc: props.fleet.vpc,
      description: 'Switchboard connect-events: HTTPS to DynamoDB, nudges to brokers',
      allowAllOutbound: true,
    });
    this.handler = new SwitchboardFunction(this, 'Function', {
      spec: functions['connect-events'],
      logRemovalPolicy: props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
      network: { vpc: props.fleet.vpc, subnets: { subnetType: ec2.SubnetType.PUBLIC }, securityGroup },
    })
      // A final event's settle is one transaction that also frees the call's slot in the lease and
      // moves the job's counts: both in the control table, and nothing else there.
      .bindTable(props.stateful.tables.control, 'readwrite', tableSpec('control').envVar, {
        writes: { actions: ['dynamodb:UpdateItem'], leadingKeys: ['LEASE#*', 'CLIENT#*'] },
      })
      // Tasks, and the call links the brokers write (held events go there too).
      .bindTable(props.stateful.tables.tasks, 'readwrite', tableSpec('tasks').envVar);
    props.fleet.allowNudgesFrom(securityGroup);
    this.rule = new events.Rule(this, 'ContactEvents', {
      description: 'Amazon Connect contact events of the configured instances → connect-events',
      eventPattern: {
        source: ['aws.connect'],
        detailType: ['Amazon Connect Contact Event'],
        detail: {
          instanceArn: props.instanceIds.map((instanceId) =>
            stack.formatArn({ service: 'connect', resource: 'instance', resourceName: instanceId }),
          ),
          eventType: ['INITIATED', 'CONNECTED_TO_SYSTEM', 'DISCONNECTED'],
        },
      },
      targets: [
        new targets.LambdaFunction(this.handler, { retryAttempts: 8, maxEventAge: Duration.hours(1) }),
      ],
    });
  }
}
