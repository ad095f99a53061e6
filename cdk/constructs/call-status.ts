/**
 * The call-status route's Lambda: takes the telephony provider's signed status callbacks, settles
 * the task durably in DynamoDB, then nudges the broker holding the client's lease at its private
 * address, so the call's slot is freed at once. It runs in the brokers' VPC for that nudge; with
 * no NAT it reaches DynamoDB through the VPC's gateway endpoint and nothing on the internet.
 */
import { Construct } from 'constructs';
import { functions } from '#shared/functions.ts';
import { tableSpec } from '#shared/resources.ts';
import { CALLBACK_SECRET_KEY_PREFIX } from '#shared/telephony/callback-secrets.ts';
import type { BrokerFleet } from './broker-fleet.ts';
import type { SwitchboardFunction } from './function.ts';
import { settlingFunction } from './settling-function.ts';
import type { StatefulResources } from './stateful.ts';

export interface CallStatusProps {
  readonly stateful: StatefulResources;
  readonly fleet: BrokerFleet;
  readonly retain: boolean;
  /** The provider name in the route (`/providers/{provider}/calls/status`). */
  readonly provider: string;
  /** The public URL of Twilio's status route: what Twilio signs, with the query it was given. */
  readonly twilioCallbackUrl: string;
}

export class CallStatus extends Construct {
  readonly handler: SwitchboardFunction;

  constructor(scope: Construct, id: string, props: CallStatusProps) {
    super(scope, id);
    this.handler = settlingFunction(this, {
      spec: functions['call-status'],
      stateful: props.stateful,
      fleet: props.fleet,
      retain: props.retain,
      description: 'Switchboard call-status: HTTPS to DynamoDB, nudges to brokers',
      environment: { TELEPHONY_PROVIDER: props.provider, TWILIO_CALLBACK_URL: props.twilioCallbackUrl },
    })
      // The provider's callback secret and the Twilio clients' auth tokens, read at run time (so a rotation needs no deploy and the
      // value never sits in the function's configuration): its item only, never a LINE channel.
      .bindTable(props.stateful.tables.channels, 'read', tableSpec('channels').envVar, {
        reads: { actions: ['dynamodb:GetItem'], leadingKeys: [`${CALLBACK_SECRET_KEY_PREFIX}*`] },
      });
  }
}
