/**
 * Customers' texts back to the clients' origination numbers (two-way SMS), from the inbound SNS
 * topic's SQS queue (raw message delivery: each body is one two-way payload) in batches with partial
 * batch failures: an opt-out keyword puts the sender's number on the suppression list of the clients
 * sending from that number. What it cannot use is logged once and acknowledged; a failed write is
 * that record's failure, given back by SQS (the write is idempotent), then dead-lettered.
 *
 * Phone numbers are personal data: logs name the outcome, the keyword and the clients, never a number.
 */
import middy from '@middy/core';
import type { SQSRecord } from 'aws-lambda';
import { batchHandler } from '#shared/adapters/sqs-record-batch.ts';
import type { Logger } from '#shared/log.ts';
import type { InboundSmsResult } from '#shared/sms/inbound-opt-outs.ts';

/** Texts handled at once: an opt-out is a cached lookup and an UpdateItem per client. */
const AT_ONCE = 8;

export interface SmsInboundDeps {
  readonly record: (body: unknown) => Promise<InboundSmsResult>;
  readonly log: Logger;
}

export function makeSmsInboundHandler(deps: SmsInboundDeps) {
  return middy(
    batchHandler({
      atOnce: AT_ONCE,
      what: 'inbound SMS',
      metric: 'InboundSms',
      log: deps.log,
      recordOne: (record) => recordOne(deps, record),
    }),
  );
}

async function recordOne(deps: SmsInboundDeps, record: SQSRecord): Promise<InboundSmsResult['outcome']> {
  const result = await deps.record(record.body);
  switch (result.outcome) {
    case 'ignored':
      deps.log.warn('inbound SMS dropped', { reason: result.reason, messageId: record.messageId });
      break;
    case 'suppressed':
      for (const clientId of result.clients)
        deps.log
          .withKeys({ clientId })
          .info('number put on the suppression list: texted an opt-out keyword', {
            keyword: result.text.keyword,
          });
      break;
    case 'no-client':
      // A person's STOP is never dropped: given back, it is tried again (a number a client has just
      // been given is found then), and at the queue's last receive it waits in the dead-letter
      // queue, alarmed, for an operator to name the number in a client's settings and redrive it.
      deps.log.error('opt-out texted to a number no client sends from: given back', {
        keyword: result.text.keyword,
        inboundMessageId: result.text.messageId,
      });
      throw new Error('opt-out texted to a number no client sends from');
    default:
      break;
  }
  return result.outcome;
}
