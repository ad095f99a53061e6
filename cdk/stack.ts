/** The Switchboard stack: one stack, a construct per capability. */
import { Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { StatefulResources } from './constructs/stateful.ts';

export interface SwitchboardStackProps extends StackProps {
  readonly stage: string;
}

export class SwitchboardStack extends Stack {
  readonly stateful: StatefulResources;

  constructor(scope: Construct, id: string, props: SwitchboardStackProps) {
    super(scope, id, props);
    this.stateful = new StatefulResources(this, 'Stateful', {
      stage: props.stage,
      retain: props.stage === 'prod',
    });
  }
}
