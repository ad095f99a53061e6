/**
 * IAM evaluation of recorded calls against a synthesized CloudFormation template: who may do what,
 * the way IAM decides it for the parts Switchboard's policies use.
 *
 * - The principals: each Lambda (found by its `Switchboard {function id}` description) and the
 *   broker task (the task definition's `TaskRoleArn`), each with the statements of every
 *   `AWS::IAM::Policy` attached to its role and the role's inline policies.
 * - Matching: actions case-insensitively with `*`/`?`, resources case-sensitively, an explicit
 *   Deny wins; conditions `StringEquals`/`StringLike`/`ArnLike`/`ArnEquals`/`StringNotEquals`/
 *   `Bool`, with the `ForAllValues:`/`ForAnyValue:` set operators (ForAllValues holds on a missing
 *   key, as in IAM). A statement with a condition this evaluator cannot read does not allow.
 * - KMS: a table under a customer-managed key asks, with each access, for `kms:Decrypt` on that
 *   key via DynamoDB; the key policy must allow the role itself, or delegate to IAM (the account
 *   root) and the role's policy allow it.
 * - Intrinsics: `Ref`, `Fn::GetAtt … Arn`, `Fn::Join`, `Fn::Select`, `Fn::Split` and the pseudo
 *   parameters resolve to normalised ARNs (`./requests.ts`), so local names compare with deployed ones.
 */
import type { RecordedCall } from './recorder.ts';
import {
  ACCOUNT,
  bucketArn,
  type IamRequest,
  normaliseName,
  normaliseResource,
  queueArn,
  REGION,
  tableArn,
} from './requests.ts';

interface CfnResource {
  readonly Type: string;
  readonly Properties?: Record<string, unknown>;
  readonly Metadata?: Record<string, unknown>;
}
export interface CfnTemplate {
  readonly Resources: Record<string, CfnResource>;
}

interface Statement {
  readonly Sid?: string;
  readonly Effect: 'Allow' | 'Deny';
  readonly Action?: unknown;
  readonly Resource?: unknown;
  readonly Principal?: unknown;
  readonly Condition?: Record<string, Record<string, unknown>>;
}

/** A statement with its intrinsics resolved. */
export interface ResolvedStatement {
  readonly effect: 'Allow' | 'Deny';
  readonly actions: readonly string[];
  readonly resources: readonly string[];
  readonly principals: readonly string[];
  readonly conditions: readonly { operator: string; key: string; values: readonly string[] }[];
  /** Where it comes from (policy logical id), for messages. */
  readonly source: string;
}

export interface Principal {
  readonly name: string;
  readonly roleId: string;
  readonly statements: readonly ResolvedStatement[];
}

export type Decision =
  | { readonly allowed: true; readonly by: ResolvedStatement }
  | { readonly allowed: false; readonly reason: string };

const UNRESOLVED = 'UNRESOLVED';
const PSEUDO: Record<string, string> = {
  'AWS::Region': REGION,
  'AWS::AccountId': ACCOUNT,
  'AWS::Partition': 'aws',
  'AWS::URLSuffix': 'amazonaws.com',
  'AWS::StackName': 'STACK',
};

const asArray = (value: unknown): unknown[] =>
  Array.isArray(value) ? value : value === undefined ? [] : [value];

export class TemplatePolicies {
  private readonly resources: Record<string, CfnResource>;

  constructor(template: CfnTemplate) {
    this.resources = template.Resources;
  }

  /** Every principal Switchboard runs code as: its Lambdas by function id, and `broker`. */
  principals(): Map<string, Principal> {
    const out = new Map<string, Principal>();
    for (const [id, resource] of Object.entries(this.resources)) {
      const props = resource.Properties ?? {};
      let name: string | undefined;
      let roleRef: unknown;
      if (resource.Type === 'AWS::Lambda::Function') {
        const match = /^Switchboard (\S+)$/.exec(String(props.Description ?? ''));
        if (match) [name, roleRef] = [match[1], props.Role];
      } else if (resource.Type === 'AWS::ECS::TaskDefinition' && props.TaskRoleArn) {
        [name, roleRef] = ['broker', props.TaskRoleArn];
      }
      const roleId = (roleRef as { 'Fn::GetAtt'?: [string, string] } | undefined)?.['Fn::GetAtt']?.[0];
      if (!name || !roleId) continue;
      if (out.has(name)) throw new Error(`two principals named ${name} (${out.get(name)!.roleId}, ${id})`);
      out.set(name, { name, roleId, statements: this.roleStatements(roleId) });
    }
    return out;
  }

  /** The statements of a role: attached `AWS::IAM::Policy` resources and its inline policies. */
  roleStatements(roleId: string): ResolvedStatement[] {
    const statements: ResolvedStatement[] = [];
    for (const [id, resource] of Object.entries(this.resources)) {
      if (resource.Type !== 'AWS::IAM::Policy') continue;
      const roles = asArray(resource.Properties?.Roles).map((r) => (r as { Ref?: string }).Ref);
      if (!roles.includes(roleId)) continue;
      statements.push(...this.documentStatements(resource.Properties?.PolicyDocument, id));
    }
    for (const policy of asArray(this.resources[roleId]?.Properties?.Policies)) {
      statements.push(
        ...this.documentStatements((policy as { PolicyDocument: unknown }).PolicyDocument, roleId),
      );
    }
    return statements;
  }

  /** The key policy of the KMS key whose ARN is `keyArn`, if the template holds it. */
  keyPolicy(keyArn: string): ResolvedStatement[] | undefined {
    const id = keyArn.split('key/')[1];
    const key = id ? this.resources[id] : undefined;
    if (key?.Type !== 'AWS::KMS::Key') return undefined;
    return this.documentStatements(key.Properties?.KeyPolicy, id!);
  }

  /** The customer-managed key of a table (by normalised ARN), if it has one. */
  tableKey(tableArnValue: string): string | undefined {
    for (const resource of Object.values(this.resources)) {
      if (resource.Type !== 'AWS::DynamoDB::Table') continue;
      if (tableArn(String(resource.Properties?.TableName ?? '')) !== tableArnValue) continue;
      const sse = resource.Properties?.SSESpecification as { KMSMasterKeyId?: unknown } | undefined;
      return sse?.KMSMasterKeyId ? this.resolveOne(sse.KMSMasterKeyId) : undefined;
    }
    return undefined;
  }

  roleArn(roleId: string): string {
    return `arn:aws:iam::${ACCOUNT}:role/${roleId}`;
  }

  private documentStatements(document: unknown, source: string): ResolvedStatement[] {
    return asArray((document as { Statement?: unknown })?.Statement).map((raw) => {
      const s = raw as Statement;
      const principal = s.Principal as { AWS?: unknown; Service?: unknown } | string | undefined;
      const principals =
        principal === undefined
          ? []
          : typeof principal === 'string'
            ? [principal]
            : asArray(principal.AWS).flatMap((p) => this.resolve(p));
      return {
        effect: s.Effect,
        actions: asArray(s.Action).map(String),
        resources: asArray(s.Resource)
          .flatMap((r) => this.resolve(r))
          .map(normaliseResource),
        principals,
        conditions: Object.entries(s.Condition ?? {}).flatMap(([operator, keys]) =>
          Object.entries(keys).map(([key, values]) => ({
            operator,
            key,
            values: asArray(values).flatMap((v) => this.resolve(v)),
          })),
        ),
        source,
      };
    });
  }

  private resolveOne(value: unknown): string {
    return this.resolve(value)[0] ?? UNRESOLVED;
  }

  /** Resolves an intrinsic to strings (a list for `Fn::Split`). */
  resolve(value: unknown): string[] {
    if (typeof value === 'string') return [value];
    if (typeof value === 'number' || typeof value === 'boolean') return [String(value)];
    if (Array.isArray(value)) return value.flatMap((v) => this.resolve(v));
    const v = value as Record<string, unknown>;
    if ('Ref' in v) return [this.ref(String(v.Ref))];
    if ('Fn::GetAtt' in v) {
      const [id, attribute] = v['Fn::GetAtt'] as [string, string];
      return [this.getAtt(id, attribute)];
    }
    if ('Fn::Join' in v) {
      const [separator, parts] = v['Fn::Join'] as [string, unknown[]];
      return [parts.map((p) => this.resolve(p).join(separator)).join(separator)];
    }
    if ('Fn::Split' in v) {
      const [separator, source] = v['Fn::Split'] as [string, unknown];
      return this.resolveOne(source).split(separator);
    }
    if ('Fn::Select' in v) {
      const [index, list] = v['Fn::Select'] as [number | string, unknown];
      return [this.resolve(list)[Number(index)] ?? UNRESOLVED];
    }
    return [UNRESOLVED];
  }

  private ref(id: string): string {
    if (PSEUDO[id]) return PSEUDO[id]!;
    const resource = this.resources[id];
    const props = resource?.Properties ?? {};
    switch (resource?.Type) {
      case 'AWS::DynamoDB::Table':
        return normaliseName(String(props.TableName ?? id));
      case 'AWS::SQS::Queue':
        return `https://sqs.${REGION}.amazonaws.com/${ACCOUNT}/${normaliseName(String(props.QueueName ?? id))}`;
      case 'AWS::S3::Bucket':
        return this.bucketName(id);
      case 'AWS::ECS::Cluster':
        return normaliseName(String(props.ClusterName ?? id));
      case 'AWS::ECS::Service':
        return `arn:aws:ecs:${REGION}:${ACCOUNT}:service/${this.resolveOne(props.Cluster)}/${normaliseName(String(props.ServiceName ?? id))}`;
      case 'AWS::IAM::Role':
        return id;
      default:
        return `${UNRESOLVED}(${id})`;
    }
  }

  private getAtt(id: string, attribute: string): string {
    const resource = this.resources[id];
    const props = resource?.Properties ?? {};
    if (attribute !== 'Arn') return `${UNRESOLVED}(${id}.${attribute})`;
    switch (resource?.Type) {
      case 'AWS::DynamoDB::Table':
        return tableArn(String(props.TableName ?? id));
      case 'AWS::SQS::Queue':
        return queueArn(String(props.QueueName ?? id));
      case 'AWS::S3::Bucket':
        return bucketArn(this.bucketName(id));
      case 'AWS::KMS::Key':
        return `arn:aws:kms:${REGION}:${ACCOUNT}:key/${id}`;
      case 'AWS::Logs::LogGroup':
        return `arn:aws:logs:${REGION}:${ACCOUNT}:log-group:${id}:*`;
      case 'AWS::IAM::Role':
        return this.roleArn(id);
      default:
        return `${UNRESOLVED}(${id}.Arn)`;
    }
  }

  /** A bucket's name: its `BucketName`, or (CDK leaves it unnamed) `switchboard-STAGE-{spec id}` from its path. */
  private bucketName(id: string): string {
    const props = this.resources[id]?.Properties ?? {};
    if (props.BucketName) return normaliseName(String(props.BucketName));
    const path = String(this.resources[id]?.Metadata?.['aws:cdk:path'] ?? '');
    const match = /\/Bucket-([a-z0-9-]+)\/Resource$/.exec(path);
    return match ? `switchboard-STAGE-${match[1]}` : id;
  }
}

/** IAM's wildcard match: `*` any run of characters, `?` one. */
export function wildcardMatch(pattern: string, value: string, ignoreCase = false): boolean {
  const source = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${source}$`, ignoreCase ? 'i' : '').test(value);
}

const GLOBAL_CONTEXT: Record<string, string> = {
  'kms:CallerAccount': ACCOUNT,
  'aws:PrincipalAccount': ACCOUNT,
};

/** Whether every condition of a statement holds for the request; `undefined` if one cannot be read. */
function conditionsHold(statement: ResolvedStatement, request: IamRequest): boolean | undefined {
  for (const condition of statement.conditions) {
    const [set, operator] = condition.operator.includes(':')
      ? (condition.operator.split(':') as [string, string])
      : [undefined, condition.operator];
    const raw = request.context[condition.key] ?? GLOBAL_CONTEXT[condition.key];
    const values = raw === undefined ? [] : Array.isArray(raw) ? (raw as string[]) : [raw as string];
    const test = (value: string): boolean | undefined => {
      switch (operator) {
        case 'StringEquals':
        case 'ArnEquals':
        case 'Bool':
          return condition.values.includes(value);
        case 'StringNotEquals':
          return !condition.values.includes(value);
        case 'StringLike':
        case 'ArnLike':
          return condition.values.some((p) => wildcardMatch(p, value));
        default:
          return undefined;
      }
    };
    const results = values.map(test);
    if (results.includes(undefined)) return undefined;
    let holds: boolean;
    if (set === 'ForAllValues') holds = results.every(Boolean);
    else if (set === 'ForAnyValue') holds = results.some(Boolean);
    else if (set === undefined) holds = values.length > 0 && results.every(Boolean);
    else return undefined;
    if (!holds) return false;
  }
  return true;
}

function statementMatches(statement: ResolvedStatement, request: IamRequest): boolean | undefined {
  if (!statement.actions.some((a) => wildcardMatch(a, request.action, true))) return false;
  if (!statement.resources.some((r) => wildcardMatch(r, request.resource))) return false;
  return conditionsHold(statement, request);
}

/** IAM's decision on one request for a set of statements: explicit Deny, then any Allow. */
export function decide(statements: readonly ResolvedStatement[], request: IamRequest): Decision {
  let unreadable: ResolvedStatement | undefined;
  let allowedBy: ResolvedStatement | undefined;
  for (const statement of statements) {
    const matches = statementMatches(statement, request);
    if (matches === undefined) unreadable ??= statement;
    if (matches !== true) continue;
    if (statement.effect === 'Deny')
      return { allowed: false, reason: `explicitly denied by ${statement.source}` };
    allowedBy ??= statement;
  }
  if (allowedBy) return { allowed: true, by: allowedBy };
  return {
    allowed: false,
    reason: unreadable
      ? `no statement allows it (a condition of ${unreadable.source} could not be evaluated)`
      : 'no statement allows it',
  };
}

/** The requests IAM sees for a recorded call: the call itself and the key use it implies. */
export function impliedRequests(policies: TemplatePolicies, call: IamRequest): IamRequest[] {
  if (!call.action.startsWith('dynamodb:')) return [call];
  const key = policies.tableKey(call.resource.replace(/\/index\/.*$/, ''));
  if (!key) return [call];
  return [
    call,
    {
      action: 'kms:Decrypt',
      resource: key,
      context: { 'kms:ViaService': `dynamodb.${REGION}.amazonaws.com` },
    },
  ];
}

/** The decision for one request of a principal, KMS key policies included. */
export function decideFor(policies: TemplatePolicies, principal: Principal, request: IamRequest): Decision {
  const identity = decide(principal.statements, request);
  if (!request.action.startsWith('kms:')) return identity;
  const keyStatements = policies.keyPolicy(request.resource);
  if (!keyStatements) return identity;
  const roleArn = policies.roleArn(principal.roleId);
  const root = `arn:aws:iam::${ACCOUNT}:root`;
  const asRole = decide(
    keyStatements.filter((s) => s.principals.some((p) => p === roleArn || wildcardMatch(p, roleArn))),
    request,
  );
  if (asRole.allowed) return asRole;
  const delegated = decide(
    keyStatements.filter((s) => s.principals.some((p) => p === root || p === ACCOUNT)),
    request,
  );
  if (delegated.allowed && identity.allowed) return identity;
  return {
    allowed: false,
    reason: delegated.allowed
      ? identity.allowed
        ? 'denied'
        : `the key delegates to IAM, and ${identity.reason}`
      : 'the key policy neither names the role nor delegates to IAM',
  };
}

export interface ConformanceReport {
  readonly denied: readonly { call: RecordedCall; request: IamRequest; reason: string }[];
  readonly unknownPrincipals: readonly string[];
  /** Per principal, statements' action × resource pairs no recorded call used. */
  readonly unused: ReadonlyMap<string, readonly string[]>;
  readonly checked: number;
}

/** Notes the action × resource pairs of `statement` that `request` used. */
function markUsed(
  used: Map<string, Set<string>>,
  principal: string,
  statement: ResolvedStatement,
  request: IamRequest,
) {
  let set = used.get(principal);
  if (!set) {
    set = new Set();
    used.set(principal, set);
  }
  for (const action of statement.actions.filter((a) => wildcardMatch(a, request.action, true))) {
    for (const resource of statement.resources.filter((r) => wildcardMatch(r, request.resource))) {
      set.add(`${action} ${resource}`);
    }
  }
}

/** Evaluates every recorded call against the template; lists what no call used. */
export function checkConformance(template: CfnTemplate, calls: readonly RecordedCall[]): ConformanceReport {
  const policies = new TemplatePolicies(template);
  const principals = policies.principals();
  const denied: { call: RecordedCall; request: IamRequest; reason: string }[] = [];
  const unknownPrincipals = new Set<string>();
  const used = new Map<string, Set<string>>();
  let checked = 0;
  for (const call of calls) {
    const principal = principals.get(call.principal);
    if (!principal) {
      unknownPrincipals.add(call.principal);
      continue;
    }
    for (const request of impliedRequests(policies, call)) {
      checked++;
      const decision = decideFor(policies, principal, request);
      if (!decision.allowed) {
        denied.push({ call, request, reason: decision.reason });
        continue;
      }
      markUsed(used, principal.name, decision.by, request);
    }
  }
  const unused = new Map<string, string[]>();
  for (const principal of principals.values()) {
    const set = used.get(principal.name) ?? new Set();
    const list = principal.statements
      .filter((s) => s.effect === 'Allow')
      .flatMap((s) => s.actions.flatMap((a) => s.resources.map((r) => `${a} ${r}`)))
      .filter((pair) => !set.has(pair) && !/^(logs|xray|ec2):/.test(pair));
    if (list.length > 0) unused.set(principal.name, [...new Set(list)]);
  }
  return { denied, unknownPrincipals: [...unknownPrincipals], unused, checked };
}
