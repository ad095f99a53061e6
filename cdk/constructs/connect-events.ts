/**
 * Amazon Connect's contact events into Switchboard: an EventBridge rule on the default bus
 * (`source: aws.connect`, `detail-type: Amazon Connect Contact Event`, the configured instances,
 * the three event types that move a call) targets the connect-events function, which settles the
 * call through the same path as a signed callback and nudges the broker holding the client. Like
 * call-status it runs in the brokers' VPC for that nudge. EventBridge delivery is best effort: the
 * target retries for an hour, and the broker's reconciliation (`DescribeContact`) covers the rest.
 */
import { Duration, Stack } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import { Construct } from 'constructs';
import { functions } from '#shared/functions.ts';
import type { BrokerFleet } from './broker-fleet.ts';
import type { SwitchboardFunction } from './function.ts';
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
