/**
 * Moves a dead-letter queue's messages back to their queue. In AWS: SQS's own message move task
 * (`StartMessageMoveTask`, source = the DLQ, destination = the queue). The local SQS (fauxqs) does
 * not implement that action, so there the same move is made by hand: receive from the DLQ, send to
 * the queue, then delete from the DLQ (a crash between the two leaves a copy in both: the delivery
 * is sent twice, which outcome webhooks allow, never lost).
 */
import {
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SQSClient,
  StartMessageMoveTaskCommand,
} from '@aws-sdk/client-sqs';

export interface RedriveQueues {
  readonly queueUrl: string;
  readonly queueArn: string;
  readonly dlqUrl: string;
  readonly dlqArn: string;
}

export type RedriveMode = 'move-task' | 'receive-send';

export type RedriveResult =
  | { readonly mode: 'move-task'; readonly taskHandle: string }
  | { readonly mode: 'receive-send'; readonly moved: number };

/** Starts (AWS) or makes (local) the move of every message of the DLQ back to its queue. */
export async function redriveDeadLetters(
  sqs: SQSClient,
  queues: RedriveQueues,
  mode: RedriveMode,
): Promise<RedriveResult> {
  if (mode === 'move-task') {
    const out = await sqs.send(
      new StartMessageMoveTaskCommand({ SourceArn: queues.dlqArn, DestinationArn: queues.queueArn }),
    );
    return { mode, taskHandle: out.TaskHandle ?? '' };
  }
  let moved = 0;
  for (;;) {
    const received = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: queues.dlqUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }),
    );
    const messages = received.Messages ?? [];
    if (messages.length === 0) return { mode, moved };
    const sent = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queues.queueUrl,
        Entries: messages.map((m, i) => ({ Id: String(i), MessageBody: m.Body ?? '' })),
      }),
    );
    const ok = new Set((sent.Successful ?? []).map((s) => s.Id));
    const done = messages.filter((_, i) => ok.has(String(i)));
    if (done.length > 0) {
      await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: queues.dlqUrl,
          Entries: done.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
        }),
      );
    }
    moved += done.length;
    if (done.length < messages.length)
      throw new Error(`${messages.length - done.length} messages could not be moved`);
  }
}
