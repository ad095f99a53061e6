/**
 * What IAM is asked when an SDK call is made: one AWS call becomes one or more authorization
 * requests (action, resource ARN, and the condition keys Switchboard's policies use). A
 * transaction is authorized item by item, with each item's own action (ConditionCheckItem,
 * PutItem, UpdateItem, DeleteItem; GetItem for TransactGetItems); a batch asks for the batch
 * action on every table it touches; a PartiQL statement asks for `dynamodb:PartiQL{Select|Insert|
 * Update|Delete}` on its table (a `BatchExecuteStatement` for each of its statements: "IAM security
 * policies with PartiQL for DynamoDB"); `SendMessageBatch` is `sqs:SendMessage`; a multipart upload's
 * parts are `s3:PutObject`. Sources: DynamoDB developer guide "Using IAM with DynamoDB
 * transactions" and "Using IAM policy conditions for fine-grained access control"; the SQS and
 * S3 actions, resources and condition keys tables of the Service Authorization Reference.
 *
 * Resource names are normalised so that a local stage and a deployed one compare equal:
 * `switchboard-{stage}-{id}` becomes `switchboard-STAGE-{id}`; the account is `ACCOUNT` on both
 * sides, and the deployment's own region `REGION`. A call to another region (a Connect client built
 * for an instance there) keeps that region in its ARN, so a policy that grants the stack's region
 * only does not match it.
 */
import { buckets, dlqId, queues, tables } from '#shared/resources.ts';

export const REGION = 'REGION';
export const ACCOUNT = 'ACCOUNT';

/** One authorization request: what a policy statement is matched against. */
export interface IamRequest {
  readonly action: string;
  readonly resource: string;
  /** Condition keys and their values (multi-valued keys as arrays). */
  readonly context: Readonly<Record<string, string | readonly string[]>>;
}

const KNOWN_IDS = [
  ...tables.map((t) => t.id),
  ...queues.flatMap((q) => [q.id, dlqId(q.id)]),
  ...buckets.map((b) => b.id),
  'brokers',
  'email',
  'sms',
].sort((a, b) => b.length - a.length);
const NAME = new RegExp(
  `^switchboard-(.+?)-(${KNOWN_IDS.map((id) => id.replace(/-/g, '\\-')).join('|')})(\\.fifo)?$`,
);

/** `switchboard-{stage}-{id}` → `switchboard-STAGE-{id}`; other names unchanged. */
export function normaliseName(name: string): string {
  const match = NAME.exec(name);
  return match ? `switchboard-STAGE-${match[2]}${match[3] ?? ''}` : name;
}

/** A resource ARN with each of its path segments that is a Switchboard name normalised (`configuration-set/switchboard-local-email`). */
export function normaliseResource(arn: string): string {
  return arn.split('/').map(normaliseName).join('/');
}

/** The spec id in a normalised or physical resource name, if it is one of Switchboard's. */
export function resourceIdOf(name: string): string | undefined {
  return NAME.exec(name)?.[2];
}

export function tableArn(table: string, index?: string): string {
  return `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/${normaliseName(table)}${index ? `/index/${index}` : ''}`;
}
export function queueArn(name: string): string {
  return `arn:aws:sqs:${REGION}:${ACCOUNT}:${normaliseName(name)}`;
}
export function bucketArn(bucket: string, key?: string): string {
  return `arn:aws:s3:::${normaliseName(bucket)}${key === undefined ? '' : `/${key}`}`;
}

type Input = Record<string, unknown>;
type AttributeValue = { S?: string; N?: string; B?: unknown };

const PARTITION_KEYS: Record<string, string> = Object.fromEntries(
  tables.map((t) => [t.id, t.partitionKey.name]),
);

/** The partition key value of an item or key, for `dynamodb:LeadingKeys`. */
function leadingKey(table: string, key: unknown): string | undefined {
  const id = resourceIdOf(table);
  const name = id ? PARTITION_KEYS[id] : 'pk';
  const value = (key as Record<string, AttributeValue> | undefined)?.[name ?? 'pk'];
  return value?.S ?? value?.N;
}

/** Each index's partition key name, by table id and index name. */
const INDEX_PARTITION_KEYS: Record<string, string> = Object.fromEntries(
  tables.flatMap((t) => t.globalIndexes.map((i) => [`${t.id}/${i.name}`, i.partitionKey.name])),
);

/**
 * The partition key value a Query's key condition names (`pk = :pk`, or with `#names`): the table's
 * key, or the index's for a Query of an index (AWS sets `dynamodb:LeadingKeys` to the index's
 * partition key value then).
 */
function queriedKey(table: string, input: Input): string | undefined {
  const id = resourceIdOf(table);
  const index = input.IndexName === undefined ? undefined : String(input.IndexName);
  const keyName = id ? (index ? INDEX_PARTITION_KEYS[`${id}/${index}`] : PARTITION_KEYS[id]) : undefined;
  const expression = String(input.KeyConditionExpression ?? '');
  const names = (input.ExpressionAttributeNames ?? {}) as Record<string, string>;
  const values = (input.ExpressionAttributeValues ?? {}) as Record<string, AttributeValue>;
  for (const match of expression.matchAll(/([#\w]+)\s*=\s*(:\w+)/g)) {
    const attribute = match[1]!.startsWith('#') ? names[match[1]!] : match[1];
    if (attribute === keyName) return values[match[2]!]?.S ?? values[match[2]!]?.N;
  }
  return undefined;
}

function dynamo(action: string, table: string, keys: (string | undefined)[], index?: string): IamRequest {
  const leading = keys.filter((k): k is string => k !== undefined);
  return {
    action: `dynamodb:${action}`,
    resource: tableArn(table, index),
    context: leading.length > 0 ? { 'dynamodb:LeadingKeys': leading } : {},
  };
}

const TRANSACT_ACTIONS: Record<string, string> = {
  ConditionCheck: 'ConditionCheckItem',
  Put: 'PutItem',
  Update: 'UpdateItem',
  Delete: 'DeleteItem',
  Get: 'GetItem',
};

function dynamoRequests(operation: string, input: Input): IamRequest[] {
  const table = String(input.TableName ?? '');
  switch (operation) {
    case 'GetItem':
    case 'UpdateItem':
    case 'DeleteItem':
      return [dynamo(operation, table, [leadingKey(table, input.Key)])];
    case 'PutItem':
      return [dynamo(operation, table, [leadingKey(table, input.Item)])];
    case 'Query':
      return [
        dynamo(
          operation,
          table,
          [queriedKey(table, input)],
          input.IndexName === undefined ? undefined : String(input.IndexName),
        ),
      ];
    case 'Scan':
      return [dynamo(operation, table, [], input.IndexName ? String(input.IndexName) : undefined)];
    case 'BatchGetItem':
    case 'BatchWriteItem':
      return batchRequests(operation, input);
    case 'TransactWriteItems':
    case 'TransactGetItems':
      return (
        (input.TransactItems ?? []) as Record<string, { TableName: string; Key?: unknown; Item?: unknown }>[]
      ).flatMap((item) =>
        Object.entries(item).map(([kind, body]) =>
          dynamo(TRANSACT_ACTIONS[kind] ?? kind, body.TableName, [
            leadingKey(body.TableName, body.Key ?? body.Item),
          ]),
        ),
      );
    case 'ExecuteStatement':
      return [partiqlRequest(input as PartiqlStatement)];
    case 'BatchExecuteStatement':
      return ((input.Statements ?? []) as PartiqlStatement[]).map(partiqlRequest);
    default:
      return [dynamo(operation, table || '*', [])];
  }
}

/** A batch asks for the batch action on every table it touches, with each item's partition key. */
function batchRequests(operation: string, input: Input): IamRequest[] {
  if (operation === 'BatchGetItem')
    return Object.entries((input.RequestItems ?? {}) as Record<string, { Keys?: unknown[] }>).map(
      ([name, request]) =>
        dynamo(
          operation,
          name,
          (request.Keys ?? []).map((k) => leadingKey(name, k)),
        ),
    );
  return Object.entries(
    (input.RequestItems ?? {}) as Record<
      string,
      { PutRequest?: { Item: unknown }; DeleteRequest?: { Key: unknown } }[]
    >,
  ).map(([name, writes]) =>
    dynamo(
      operation,
      name,
      writes.map((w) => leadingKey(name, w.PutRequest?.Item ?? w.DeleteRequest?.Key)),
    ),
  );
}

interface PartiqlStatement {
  readonly Statement?: string;
  readonly Parameters?: AttributeValue[];
}

/**
 * The PartiQL action of a statement on its table, with the partition key its `WHERE` names
 * (`"pk" = ?` or `pk = ?`, the value read from the parameters by position).
 */
export function partiqlRequest(statement: PartiqlStatement): IamRequest {
  const text = String(statement.Statement ?? '');
  const match = /^\s*(SELECT\b.*?\bFROM|INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+"?([\w.-]+)"?/is.exec(text);
  const verb = (match?.[1] ?? '').trim().split(/\s+/)[0]!.toUpperCase();
  const action = {
    SELECT: 'PartiQLSelect',
    INSERT: 'PartiQLInsert',
    UPDATE: 'PartiQLUpdate',
    DELETE: 'PartiQLDelete',
  }[verb];
  const table = match?.[2] ?? '*';
  const id = resourceIdOf(table);
  const keyName = id ? PARTITION_KEYS[id] : undefined;
  let leading: string | undefined;
  const where = text.search(/\bWHERE\b/i);
  if (keyName && where >= 0) {
    const key = new RegExp(`"?\\b${keyName}\\b"?\\s*=\\s*\\?`).exec(text.slice(where));
    if (key) {
      const position = (text.slice(0, where + key.index + key[0].length).match(/\?/g) ?? []).length - 1;
      const value = statement.Parameters?.[position];
      leading = value?.S ?? value?.N;
    }
  }
  return dynamo(action ?? 'PartiQLUnknown', table, [leading]);
}

const SQS_ACTIONS: Record<string, string> = {
  SendMessageBatch: 'SendMessage',
  DeleteMessageBatch: 'DeleteMessage',
  ChangeMessageVisibilityBatch: 'ChangeMessageVisibility',
};

function sqsRequests(operation: string, input: Input): IamRequest[] {
  const name = input.QueueUrl ? String(input.QueueUrl).split('/').pop()! : String(input.QueueName ?? '*');
  return [{ action: `sqs:${SQS_ACTIONS[operation] ?? operation}`, resource: queueArn(name), context: {} }];
}

const S3_OBJECT_ACTIONS: Record<string, string> = {
  GetObject: 'GetObject',
  HeadObject: 'GetObject',
  PutObject: 'PutObject',
  CreateMultipartUpload: 'PutObject',
  UploadPart: 'PutObject',
  CompleteMultipartUpload: 'PutObject',
  AbortMultipartUpload: 'AbortMultipartUpload',
  DeleteObject: 'DeleteObject',
};

function s3Requests(operation: string, input: Input): IamRequest[] {
  const bucket = String(input.Bucket ?? '*');
  const objectAction = S3_OBJECT_ACTIONS[operation];
  if (objectAction) {
    return [
      { action: `s3:${objectAction}`, resource: bucketArn(bucket, String(input.Key ?? '')), context: {} },
    ];
  }
  if (operation === 'ListObjectsV2' || operation === 'ListObjects') {
    return [
      {
        action: 's3:ListBucket',
        resource: bucketArn(bucket),
        context: input.Prefix === undefined ? {} : { 's3:prefix': String(input.Prefix) },
      },
    ];
  }
  return [{ action: `s3:${operation}`, resource: bucketArn(bucket), context: {} }];
}

function ecsRequests(operation: string, input: Input): IamRequest[] {
  // Task definitions take no resource-level permission.
  if (operation === 'DescribeTaskDefinition')
    return [{ action: `ecs:${operation}`, resource: '*', context: {} }];
  const cluster = normaliseName(String(input.cluster ?? 'default'));
  const named = input.service ?? (input.services as unknown[] | undefined)?.[0];
  const service = named ? normaliseName(String(named)) : undefined;
  const resource = service
    ? `arn:aws:ecs:${REGION}:${ACCOUNT}:service/${cluster}/${service}`
    : `arn:aws:ecs:${REGION}:${ACCOUNT}:cluster/${cluster}`;
  return [{ action: `ecs:${operation}`, resource, context: {} }];
}

function connectRequests(operation: string, input: Input, region: string): IamRequest[] {
  // A contact is the resource; a new one (a start) has no id yet: the instance's contacts.
  // GetContactAttributes names it by its initial contact id.
  const named = input.ContactId ?? input.InitialContactId;
  const contact = typeof named === 'string' ? named : '*';
  const resource = `arn:aws:connect:${region}:${ACCOUNT}:instance/${String(input.InstanceId)}/contact/${contact}`;
  return [{ action: `connect:${operation}`, resource, context: {} }];
}

/** SES v2's send actions: the operation's own name (`ses:SendEmail`, `ses:SendBulkEmail`). */
const SES_SENDS = new Set(['SendEmail', 'SendBulkEmail']);

/**
 * An SES v2 call. A send is authorized on the identity it sends as (the From address's domain,
 * or the identity its ARN names) and on the configuration set it names; `GetAccount` has no
 * resource (Service Authorization Reference, Amazon SES v2).
 */
function sesRequests(operation: string, input: Input, region: string): IamRequest[] {
  const arn = (resource: string) => `arn:aws:ses:${region}:${ACCOUNT}:${resource}`;
  if (!SES_SENDS.has(operation)) return [{ action: `ses:${operation}`, resource: '*', context: {} }];
  const from = String(input.FromEmailAddress ?? '');
  const identity = input.FromEmailAddressIdentityArn
    ? String(input.FromEmailAddressIdentityArn)
    : arn(
        `identity/${
          from
            .replace(/^.*<([^>]*)>.*$/, '$1')
            .split('@')
            .pop() ?? '*'
        }`,
      );
  const requests: IamRequest[] = [{ action: `ses:${operation}`, resource: identity, context: {} }];
  if (input.ConfigurationSetName !== undefined) {
    const set = normaliseName(String(input.ConfigurationSetName));
    requests.push({ action: `ses:${operation}`, resource: arn(`configuration-set/${set}`), context: {} });
  }
  return requests;
}

/**
 * An End User Messaging SMS call. `SendTextMessage` is authorized on the origination identity it
 * sends from (an ARN as given; a phone number, sender ID or pool id as the resource of its type: the
 * service resolves a number to its `phone-number/` resource) and on the configuration set it names
 * (Service Authorization Reference, AWS End User Messaging SMS and Voice V2).
 */
function smsRequests(operation: string, input: Input, region: string): IamRequest[] {
  const arn = (resource: string) => `arn:aws:sms-voice:${region}:${ACCOUNT}:${resource}`;
  const action = `sms-voice:${operation}`;
  if (operation !== 'SendTextMessage') return [{ action, resource: '*', context: {} }];
  const identity = String(input.OriginationIdentity ?? '*');
  const resource = identity.startsWith('arn:')
    ? identity
    : identity.startsWith('+')
      ? arn(`phone-number/${identity}`)
      : identity.startsWith('pool-')
        ? arn(`pool/${identity}`)
        : identity.startsWith('phone-')
          ? arn(`phone-number/${identity}`)
          : arn(`sender-id/${identity}/*`);
  const requests: IamRequest[] = [{ action, resource, context: {} }];
  if (input.ConfigurationSetName !== undefined) {
    const set = normaliseName(String(input.ConfigurationSetName));
    requests.push({ action, resource: arn(`configuration-set/${set}`), context: {} });
  }
  return requests;
}

const SERVICES: Record<string, (operation: string, input: Input, region: string) => IamRequest[]> = {
  SESv2Client: sesRequests,
  PinpointSMSVoiceV2Client: smsRequests,
  ConnectClient: connectRequests,
  DynamoDBClient: dynamoRequests,
  SQSClient: sqsRequests,
  S3Client: s3Requests,
  ECSClient: ecsRequests,
};

/**
 * The authorization requests of one SDK call (`clientName` and `commandName` as the SDK's
 * handler context names them, `input` after marshalling, `region` the one it goes to: {@link REGION}
 * for the deployment's own).
 */
export function iamRequestsOf(
  clientName: string,
  commandName: string,
  input: Input,
  region: string = REGION,
): IamRequest[] {
  const operation = commandName.replace(/Command$/, '');
  const service = SERVICES[clientName];
  if (!service)
    return [
      {
        action: `${clientName.replace(/Client$/, '').toLowerCase()}:${operation}`,
        resource: '*',
        context: {},
      },
    ];
  return service(operation, input, region);
}
