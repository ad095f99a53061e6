/**
 * The call-status route's Lambda: takes the telephony provider's signed status callbacks, settles
 * the task durably in DynamoDB, then nudges the broker holding the client's lease at its private
 * address, so the call's slot is freed at once. It runs in the brokers' VPC for that nudge; with
 * no NAT it reaches DynamoDB through the VPC's gateway endpoint and nothing on the internet.
 */
import { RemovalPolicy } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { Construct } from 'constructs';
import { functions } from '#shared/functions.ts';
import { tableSpec } from '#shared/resources.ts';
import { CALLBACK_SECRET_KEY_PREFIX } from '#shared/telephony/callback-secrets.ts';
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

  constructor(scope: Construct, id: string, props: CallStatusProps) {
    super(scope, id);
    const securityGroup = new ec2.SecurityGroup(this, 'SecurityGroup', {
      vpc: props.fleet.vpc,
      description: 'Switchboard call-status: HTTPS to DynamoDB, nudges to brokers',
      allowAllOutbound: true,
    });
    this.handler = new SwitchboardFunction(this, 'Function', {
      spec: functions['call-status'],
      logRemovalPolicy: props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
      network: {
        vpc: props.fleet.vpc,
        subnets: { subnetType: ec2.SubnetType.PUBLIC },
        securityGroup,
      },
      environment: { TELEPHONY_PROVIDER: props.provider },
    })
      // A final callback's settle is one transaction that also frees the call's slot in the lease
      // and moves the job's counts: both in the control table, and nothing else there.
      .bindTable(props.stateful.tables.control, 'readwrite', tableSpec('control').envVar, {
        writes: { actions: ['dynamodb:UpdateItem'], leadingKeys: ['LEASE#*', 'CLIENT#*'] },
      })
      .bindTable(props.stateful.tables.tasks, 'readwrite', tableSpec('tasks').envVar)
      // The provider's callback secret, read at run time (so a rotation needs no deploy and the
      // value never sits in the function's configuration): its item only, never a LINE channel.
      .bindTable(props.stateful.tables.channels, 'read', tableSpec('channels').envVar, {
        reads: { actions: ['dynamodb:GetItem'], leadingKeys: [`${CALLBACK_SECRET_KEY_PREFIX}*`] },
      });
    props.fleet.allowNudgesFrom(securityGroup);
  }
}
