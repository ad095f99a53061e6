/** The Switchboard stack: one stack, a construct per capability. */
import { Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { SwitchboardHttpApi } from './constructs/http-api.ts';
import { StatefulResources } from './constructs/stateful.ts';
import { Webhooks } from './constructs/webhooks.ts';

export interface SwitchboardStackProps extends StackProps {
  readonly stage: string;
}

export class SwitchboardStack extends Stack {
  readonly stateful: StatefulResources;
  readonly webhooks: Webhooks;
  readonly api: SwitchboardHttpApi;

  constructor(scope: Construct, id: string, props: SwitchboardStackProps) {
    super(scope, id, props);
    const retain = props.stage === 'prod';
    this.stateful = new StatefulResources(this, 'Stateful', { stage: props.stage, retain });
    this.webhooks = new Webhooks(this, 'Webhooks', { stage: props.stage, stateful: this.stateful, retain });
    this.api = new SwitchboardHttpApi(this, 'Api', {
      stage: props.stage,
      handlers: { 'webhook-receiver': this.webhooks.receiver },
      alarmTopic: this.webhooks.alarmTopic,
    });
    this.webhooks.publishWebhookUrl(this.api);
  }
}
