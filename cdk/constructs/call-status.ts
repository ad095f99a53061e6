/**
 * The call-status route's Lambda: takes the telephony provider's signed status callbacks, settles
 * the task durably in DynamoDB, then nudges the broker holding the client's lease at its private
 * address, so the call's slot is freed at once. It runs in the brokers' VPC for that nudge; with
 * no NAT it reaches DynamoDB through the VPC's gateway endpoint and nothing on the internet.
 */
import { RemovalPolicy } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { NagSuppressions } from 'cdk-nag';
import { Construct } from 'constructs';
import { functions } from '#shared/functions.ts';
import { tableSpec } from '#shared/resources.ts';
import type { BrokerFleet } from './broker-fleet.ts';
import { SwitchboardFunction } from './function.ts';
import type { StatefulResources } from './stateful.ts';

export interface CallStatusProps {
  readonly stateful: StatefulResources;
  readonly fleet: BrokerFleet;
  readonly retain: boolean;
  /** The provider name in the route (`/providers/{provider}/calls/status`). */
  readonly provider: string;
}

export class CallStatus extends Construct {
  readonly handler: SwitchboardFunction;
  /** The HMAC secret the provider signs callbacks with; set it after the first deploy. */
  readonly callbackSecret: secretsmanager.Secret;

  constructor(scope: Construct, id: string, props: CallStatusProps) {
    super(scope, id);
    const securityGroup = new ec2.SecurityGroup(this, 'SecurityGroup', {
      vpc: props.fleet.vpc,
      description: 'Switchboard call-status: HTTPS to DynamoDB, nudges to brokers',
      allowAllOutbound: true,
    });
    this.callbackSecret = new secretsmanager.Secret(this, 'CallbackSecret', {
      description: 'Switchboard: HMAC secret of the telephony provider status callbacks',
      removalPolicy: props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    });
    NagSuppressions.addResourceSuppressions(this.callbackSecret, [
      {
        id: 'AwsSolutions-SMG4',
        reason: 'The provider issues this secret; it is rotated on the provider side and put here by hand.',
      },
    ]);
    this.handler = new SwitchboardFunction(this, 'Function', {
      spec: functions['call-status'],
      logRemovalPolicy: props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
      network: {
        vpc: props.fleet.vpc,
        subnets: { subnetType: ec2.SubnetType.PUBLIC },
        securityGroup,
      },
      environment: {
        TELEPHONY_PROVIDER: props.provider,
        // Resolved by CloudFormation at deploy time; the secret's value never enters the template.
        TELEPHONY_CALLBACK_SECRET: this.callbackSecret.secretValue.unsafeUnwrap(),
      },
    })
      // A final callback's settle is one transaction that also frees the call's slot in the lease
      // and moves the job's counts: both in the control table, and nothing else there.
      .bindTable(props.stateful.tables.control, 'readwrite', tableSpec('control').envVar, {
        writes: { actions: ['dynamodb:UpdateItem'], leadingKeys: ['LEASE#*', 'CLIENT#*'] },
      })
      .bindTable(props.stateful.tables.tasks, 'readwrite', tableSpec('tasks').envVar);
    props.fleet.allowNudgesFrom(securityGroup);
  }
}
