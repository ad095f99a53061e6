/**
 * A function that settles calls and nudges the broker holding the client: the call-status route's
 * and the Connect contact events' target. It runs in the brokers' VPC for the nudge (with no NAT it
 * reaches DynamoDB through the VPC's gateway endpoint and nothing on the internet), settles in one
 * transaction that also frees the call's slot in the lease and moves the job's counts (both in the
 * control table, and nothing else there), and reads and writes the tasks table (tasks, call links).
 * The security group and the function are made in `scope` as `SecurityGroup` and `Function`.
 */
import { RemovalPolicy } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import type { Construct } from 'constructs';
import type { FunctionSpec } from '#shared/functions.ts';
import { tableSpec } from '#shared/resources.ts';
import type { BrokerFleet } from './broker-fleet.ts';
import { SwitchboardFunction } from './function.ts';
import type { StatefulResources } from './stateful.ts';

export interface SettlingFunctionProps {
  readonly spec: FunctionSpec;
  readonly stateful: StatefulResources;
  readonly fleet: BrokerFleet;
  readonly retain: boolean;
  readonly description: string;
  readonly environment?: Record<string, string>;
}

export function settlingFunction(scope: Construct, props: SettlingFunctionProps): SwitchboardFunction {
  const securityGroup = new ec2.SecurityGroup(scope, 'SecurityGroup', {
    vpc: props.fleet.vpc,
    description: props.description,
    allowAllOutbound: true,
  });
  const handler = new SwitchboardFunction(scope, 'Function', {
    spec: props.spec,
    logRemovalPolicy: props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    network: { vpc: props.fleet.vpc, subnets: { subnetType: ec2.SubnetType.PUBLIC }, securityGroup },
    ...(props.environment ? { environment: props.environment } : {}),
  })
    .bindTable(props.stateful.tables.control, 'readwrite', tableSpec('control').envVar, {
      // SUPPRESS#: a call outcome that asks to opt out adds the recipient to the suppression list.
      writes: { actions: ['dynamodb:UpdateItem'], leadingKeys: ['LEASE#*', 'CLIENT#*', 'SUPPRESS#*'] },
    })
    .bindTable(props.stateful.tables.tasks, 'readwrite', tableSpec('tasks').envVar);
  props.fleet.allowNudgesFrom(securityGroup);
  return handler;
}
