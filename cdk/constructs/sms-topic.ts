/**
 * An SNS topic End User Messaging SMS publishes to, as its user guide asks: encrypted with a
 * customer-managed KMS key whose policy lets `sms-voice.amazonaws.com` use it (an AWS-managed SNS key
 * cannot be given to the service), a topic policy that lets the service publish only for this account
 * (and, for a configuration set's destination, only that set: the confused-deputy conditions), TLS
 * only; and the stack's SQS queue subscribed with raw message delivery, so each message body is the
 * service's JSON record itself (`shared/sms/sns-body.ts` reads an envelope too).
 *
 * SNS retries a delivery to an SQS queue that fails on AWS's side; what it cannot deliver — at once
 * for a client-side failure (the queue's policy, a key), after its retries for a server-side one —
 * goes to the subscription's dead-letter queue (`switchboard-{stage}-{queue}-undelivered`, alarmed
 * by the caller), with the reason in its attributes, so nothing is lost quietly ("Amazon SNS
 * dead-letter queues", https://docs.aws.amazon.com/sns/latest/dg/sns-dead-letter-queues.html).
 *
 * Sources: "Amazon SNS access policy" (event destinations, with the key policy for encrypted topics),
 * https://docs.aws.amazon.com/sms-voice/latest/userguide/configuration-sets-sns-creating-role.html;
 * "Topic policies for Amazon SNS topics" (two-way SMS, encrypted topics: a symmetric key, its policy),
 * https://docs.aws.amazon.com/sms-voice/latest/userguide/two-way-sms-iam-policy-auto.html.
 */
import { Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { NagSuppressions } from 'cdk-nag';
import { Construct } from 'constructs';

/** The service principal of End User Messaging SMS. */
export const SMS_VOICE_PRINCIPAL = 'sms-voice.amazonaws.com';

/** Only this account's End User Messaging SMS resources (`arn:…:sms-voice:{region}:{account}:…`). */
function serviceConditions(scope: Construct, sourceArn: string) {
  const stack = Stack.of(scope);
  return {
    StringEquals: { 'aws:SourceAccount': stack.account },
    ArnLike: { 'aws:SourceArn': sourceArn },
  };
}

/** The ARN pattern of this account's End User Messaging SMS resources of `resource` (`*`: any). */
export function smsVoiceArn(scope: Construct, resource: string): string {
  const stack = Stack.of(scope);
  return `arn:${stack.partition}:sms-voice:${stack.region}:${stack.account}:${resource}`;
}

/** The key both SMS topics are encrypted with, usable by the service for this account only. */
export function smsTopicsKey(scope: Construct, id: string, retain: boolean): kms.Key {
  const key = new kms.Key(scope, id, {
    description:
      "Switchboard: encrypts End User Messaging SMS's topics (delivery events, customers' texts back)",
    enableKeyRotation: true,
    removalPolicy: retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
  });
  key.addToResourcePolicy(
    new iam.PolicyStatement({
      sid: 'EndUserMessagingSmsPublishes',
      principals: [new iam.ServicePrincipal(SMS_VOICE_PRINCIPAL)],
      actions: ['kms:GenerateDataKey*', 'kms:Decrypt'],
      resources: ['*'],
      conditions: serviceConditions(scope, smsVoiceArn(scope, '*')),
    }),
  );
  return key;
}

export interface SmsTopicProps {
  readonly topicName: string;
  readonly key: kms.IKey;
  /** The resources the service may publish for (`aws:SourceArn`). */
  readonly sourceArn: string;
  /** The queue the topic's messages go to (raw message delivery). */
  readonly queue: sqs.IQueue;
  /** The subscription's dead-letter queue's name. */
  readonly deadLettersName: string;
  readonly retain: boolean;
}

/** The topic, its policy and its queue's subscription. */
export class SmsTopic extends Construct {
  readonly topic: sns.Topic;
  readonly subscription: sns.Subscription;
  /** Messages SNS could not deliver to the queue (a client-side failure). */
  readonly deadLetters: sqs.Queue;

  constructor(scope: Construct, id: string, props: SmsTopicProps) {
    super(scope, id);
    this.topic = new sns.Topic(this, 'Topic', {
      topicName: props.topicName,
      masterKey: props.key,
      enforceSSL: true,
    });
    this.topic.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'EndUserMessagingSmsPublishes',
        principals: [new iam.ServicePrincipal(SMS_VOICE_PRINCIPAL)],
        actions: ['sns:Publish'],
        resources: [this.topic.topicArn],
        conditions: serviceConditions(this, props.sourceArn),
      }),
    );
    this.deadLetters = new sqs.Queue(this, 'Undelivered', {
      queueName: props.deadLettersName,
      removalPolicy: props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    NagSuppressions.addResourceSuppressions(this.deadLetters, [
      {
        id: 'AwsSolutions-SQS3',
        reason:
          "This queue is the dead-letter queue of an SNS subscription: nothing consumes it but an operator moving its messages back to the subscription's queue, so it needs no DLQ of its own.",
      },
    ]);
    this.subscription = this.topic.addSubscription(
      new subscriptions.SqsSubscription(props.queue, {
        rawMessageDelivery: true,
        deadLetterQueue: this.deadLetters,
      }),
    );
  }
}
