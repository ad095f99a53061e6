/**
 * Moves outcome webhook deliveries from their dead-letter queue back to the delivery queue, once
 * the receiver is fixed (they are delivered again, with the same event ids):
 *
 *   npm run outcome-webhooks:redrive -- --stage prod --region ap-northeast-1   # AWS: StartMessageMoveTask
 *   npm run outcome-webhooks:redrive -- --endpoint http://127.0.0.1:PORT        # `npm start`'s SQS
 *
 * In AWS it uses the SDK's default credentials; the queue names follow `shared/resources.ts`.
 * With `--endpoint` (the local cloud's SQS, stage `local`) it moves the messages itself: the local
 * SQS (fauxqs) has no message move task.
 */

import { parseArgs } from 'node:util';
import { GetQueueAttributesCommand, GetQueueUrlCommand, SQSClient } from '@aws-sdk/client-sqs';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '#local/cloud.ts';
import { type RedriveQueues, redriveDeadLetters } from '#shared/adapters/sqs-dlq-redrive.ts';
import { dlqName, queueName, queueSpec } from '#shared/resources.ts';

const spec = queueSpec('outcome-webhooks');

async function queuesOf(sqs: SQSClient, stage: string): Promise<RedriveQueues> {
  const endpoint = async (name: string) => {
    const { QueueUrl } = await sqs.send(new GetQueueUrlCommand({ QueueName: name }));
    const attrs = await sqs.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['QueueArn'] }));
    return { url: QueueUrl!, arn: attrs.Attributes!.QueueArn! };
  };
  const [queue, dlq] = await Promise.all([endpoint(queueName(stage, spec)), endpoint(dlqName(stage, spec))]);
  return { queueUrl: queue.url, queueArn: queue.arn, dlqUrl: dlq.url, dlqArn: dlq.arn };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      stage: { type: 'string' },
      region: { type: 'string' },
      /** The local cloud's SQS endpoint (`npm start` prints it): move the messages by hand. */
      endpoint: { type: 'string' },
    },
  });
  const local = values.endpoint !== undefined;
  const stage = values.stage ?? (local ? 'local' : 'prod');
  const sqs = local
    ? new SQSClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS, endpoint: values.endpoint! })
    : new SQSClient(values.region ? { region: values.region } : {});
  const queues = await queuesOf(sqs, stage);
  const result = await redriveDeadLetters(sqs, queues, local ? 'receive-send' : 'move-task');
  console.log(
    result.mode === 'move-task'
      ? `started message move task ${result.taskHandle}: ${queues.dlqArn} -> ${queues.queueArn}`
      : `moved ${result.moved} deliveries back to ${queues.queueUrl}`,
  );
  sqs.destroy();
}

await main();
