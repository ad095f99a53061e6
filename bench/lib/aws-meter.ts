/**
 * Counts every AWS request the real code makes, for the cost and scale benches: a middleware on
 * every SDK client built by `shared/adapters/aws-clients.ts` (so the very clients the handlers and
 * the broker use) that records each command by who made it (the Lambda function on whose behalf it
 * runs, `awsPrincipal`; else this process's own name), by service and operation, and by the
 * adapter file that sent it (read from the call's stack: `dynamo-message-claims`,
 * `dynamo-message-outcomes`, …), so a figure can be broken down by stage.
 *
 * DynamoDB calls are sent with `ReturnConsumedCapacity: 'INDEXES'` (the table and each index apart;
 * `TOTAL` would hide the index writes this bench must show), and the units are counted by AWS's
 * rules where DynamoDB Local's differ:
 * - DynamoDB Local reports a transaction's units wrongly: about one item's worth whatever the
 *   number of items (a 50-item transaction "consumes" 4 table units), and its index writes doubled.
 *   So a transaction's units are computed here, item by item, from each item's state read just
 *   before and just after it (consistent reads by a client of the meter's own, not counted): AWS
 *   doubles the table's writes (two underlying writes, prepare and commit: 2 WCU per item per KB,
 *   a ConditionCheck too) and updates indexes after the transaction at the standard rate.
 *   (Transactional reads, 2 RCU per 4 KB, Local reports right.)
 * - A PartiQL `BatchExecuteStatement` of writes DynamoDB Local answers with no consumed capacity:
 *   its units are computed the same way, statement by statement, at the standard rate (each
 *   statement is a single-item write: 1 WCU per KB, its index writes as above).
 * - A write refused by its condition returns no consumed capacity, but AWS charges it: 1 WCU per
 *   refused single write (items here are under 1 KB), 2 per item of a cancelled transaction.
 * - A `BatchGetItem`'s keys that find no item DynamoDB Local does not charge; AWS charges each the
 *   least read (0.5 unit, 1 strongly consistent), added here.
 * Everything else (item sizes rounded up to 1 KB / 4 KB, index puts, an index key change as a
 * delete and a put, eventually consistent reads at half) DynamoDB Local already reports as AWS
 * does (checked against `ReturnConsumedCapacity` answers for each case, see docs/cost.md).
 */
import { type AttributeValue, BatchGetItemCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { awsPrincipal } from '#local/iam/recorder.ts';
import { onEveryAwsClient } from '#shared/adapters/aws-client-hooks.ts';
import { type TableSpec, tables } from '#shared/resources.ts';

/** What one kind of request (who × service × operation × component) added up to. */
export interface Counter {
  requests: number;
  /** Read units (RCU / RRU) by AWS's rules. */
  read: number;
  /** Write units on tables by AWS's rules. */
  writeTable: number;
  /** Write units on global secondary indexes by AWS's rules. */
  writeIndex: number;
  /** What DynamoDB Local reported (before the rules above), for the record. */
  reportedWrite: number;
  /** Requests refused (a condition, a cancelled transaction, an error). */
  failed: number;
  /** Transactions whose items the meter could not read (counted 2 WCU an item, no index). */
  unmeasured: number;
  /** Items in TransactWriteItems / BatchWriteItem / BatchGetItem / SendMessageBatch requests. */
  items: number;
}

/** Counters by `principal|service|operation|component`. */
export type Tally = Record<string, Counter>;

export const KEY_SEPARATOR = '|';

export interface MeterKey {
  readonly principal: string;
  readonly service: string;
  readonly operation: string;
  readonly component: string;
}

export function splitKey(key: string): MeterKey {
  const [principal = '', service = '', operation = '', component = ''] = key.split(KEY_SEPARATOR);
  return { principal, service, operation, component };
}

const emptyCounter = (): Counter => ({
  requests: 0,
  read: 0,
  writeTable: 0,
  writeIndex: 0,
  reportedWrite: 0,
  failed: 0,
  unmeasured: 0,
  items: 0,
});

const READS = /^(Get|BatchGet|TransactGet|Query|Scan)/;

interface Capacity {
  CapacityUnits?: number;
  ReadCapacityUnits?: number;
  WriteCapacityUnits?: number;
  Table?: { CapacityUnits?: number };
  GlobalSecondaryIndexes?: Record<string, { CapacityUnits?: number }>;
}

/**
 * Records the AWS requests of this process. {@link install} it before any client is built; read
 * {@link snapshot} before and after what is measured and subtract ({@link diffTally}).
 */
export class AwsMeter {
  readonly #tally: Tally = {};
  readonly #self: string;
  #reader: DynamoDBClient | undefined;

  /** `self`: the principal of requests made outside any Lambda invocation (e.g. `broker`). */
  constructor(self: string) {
    this.#self = self;
  }

  install(): () => void {
    Error.stackTraceLimit = Math.max(Error.stackTraceLimit, 40);
    const meter = this;
    return onEveryAwsClient({
      applyToStack(stack) {
        const add = (stack as unknown as { add: (mw: unknown, options: unknown) => void }).add.bind(stack);
        // Who calls: read where the call starts (its stack is still the adapter's, synchronously).
        add(
          (next: (args: unknown) => Promise<unknown>, context: Record<string, unknown>) =>
            (args: unknown) => {
              context[COMPONENT] = componentOf(new Error().stack ?? '');
              context[PRINCIPAL] = awsPrincipal.getStore() ?? meter.#self;
              return next(args);
            },
          { step: 'initialize', name: 'benchAwsMeterCaller', priority: 'high' },
        );
        // What it costs: at serialize, where a DocumentClient's input is already marshalled.
        add(
          (
            next: (args: unknown) => Promise<{ output: Record<string, unknown> }>,
            context: Record<string, unknown>,
          ) =>
            async (args: { input: Record<string, unknown> }) => {
              const service = String(context.clientName ?? 'unknown').replace(/Client$/, '');
              const operation = String(context.commandName ?? 'unknown').replace(/Command$/, '');
              const key = [context[PRINCIPAL], service, operation, context[COMPONENT]].join(KEY_SEPARATOR);
              const dynamo = service === 'DynamoDB' && operation !== 'DescribeTable';
              if (dynamo) args.input.ReturnConsumedCapacity = 'INDEXES';
              const measured = dynamo && ITEM_BY_ITEM.has(operation);
              const before = measured
                ? await meter.#read(operation, args.input).catch(() => undefined)
                : undefined;
              try {
                const result = await next(args);
                const consumed = dynamo ? result.output.ConsumedCapacity : undefined;
                meter.#record(key, operation, args.input, consumed);
                if (dynamo && operation === 'BatchGetItem')
                  meter.#missingKeys(key, args.input, result.output);
                const after = before && (await meter.#read(operation, args.input).catch(() => undefined));
                if (before && after && operation === 'BatchExecuteStatement')
                  meter.#statements(key, args.input, before, after, result.output.Responses);
                else if (before && after) meter.#transaction(key, args.input, before, after);
                else if (measured) meter.#unmeasured(key, operation, args.input);
                return result;
              } catch (error) {
                meter.#refused(key, operation, args.input, dynamo);
                throw error;
              }
            },
          { step: 'serialize', name: 'benchAwsMeter', priority: 'high' },
        );
      },
    });
  }

  /** A copy of the counts so far. */
  snapshot(): Tally {
    return structuredClone(this.#tally);
  }

  #counter(key: string): Counter {
    this.#tally[key] ??= emptyCounter();
    return this.#tally[key];
  }

  #record(key: string, operation: string, input: Record<string, unknown>, consumed: unknown): void {
    const c = this.#counter(key);
    c.requests += 1;
    c.items += itemsIn(operation, input);
    const list = (Array.isArray(consumed) ? consumed : consumed ? [consumed] : []) as Capacity[];
    for (const cap of list) {
      const total = cap.CapacityUnits ?? (cap.ReadCapacityUnits ?? 0) + (cap.WriteCapacityUnits ?? 0);
      if (READS.test(operation)) {
        c.read += total;
        continue;
      }
      c.reportedWrite += total;
      // A transaction's (or a PartiQL batch's) units are computed item by item: Local's are wrong (or none).
      if (ITEM_BY_ITEM.has(operation)) continue;
      const index = Object.values(cap.GlobalSecondaryIndexes ?? {}).reduce(
        (sum, i) => sum + (i.CapacityUnits ?? 0),
        0,
      );
      c.writeTable += cap.Table?.CapacityUnits ?? total - index;
      c.writeIndex += index;
    }
  }

  /**
   * A `BatchGetItem`'s keys that found no item: AWS charges each the least read (0.5 unit, 1 when
   * strongly consistent: "Requests for nonexistent items consume the minimum read capacity units
   * according to the type of read", the BatchGetItem API reference); DynamoDB Local reports only
   * the items found.
   */
  #missingKeys(key: string, input: Record<string, unknown>, output: Record<string, unknown>): void {
    const requested = (input.RequestItems ?? {}) as Record<
      string,
      { Keys: unknown[]; ConsistentRead?: boolean }
    >;
    const found = (output.Responses ?? {}) as Record<string, unknown[]>;
    const unprocessed = (output.UnprocessedKeys ?? {}) as Record<string, { Keys?: unknown[] }>;
    const c = this.#counter(key);
    for (const [table, ask] of Object.entries(requested)) {
      const missing = ask.Keys.length - (found[table]?.length ?? 0) - (unprocessed[table]?.Keys?.length ?? 0);
      c.read += Math.max(0, missing) * (ask.ConsistentRead ? 1 : 0.5);
    }
  }

  /**
   * A transaction's write units by AWS's rules, from each item's state before and after: 2 WCU per
   * item per KB on the table (the larger of before and after; a ConditionCheck as a write), and at
   * the standard rate on each index: a put when the item enters it, a delete when it leaves, both
   * when its index key changes, one write when an item that stays is changed (projection ALL; none
   * for a keys-only index, whose entry is 1 unit).
   */
  #transaction(key: string, input: Record<string, unknown>, before: ItemStates, after: ItemStates): void {
    const c = this.#counter(key);
    for (const action of transactActions(input)) {
      const id = itemId(action.table, action.key);
      const old = before.get(id);
      this.#itemWrite(c, action.table, old, action.kind === 'ConditionCheck' ? old : after.get(id), 2);
    }
  }

  /**
   * A PartiQL batch's write units: each statement applied as a single-item write (1 WCU per KB,
   * its index writes), each refused by its condition 1 WCU.
   */
  #statements(
    key: string,
    input: Record<string, unknown>,
    before: ItemStates,
    after: ItemStates,
    responses: unknown,
  ): void {
    const c = this.#counter(key);
    statementActions(input).forEach((action, j) => {
      if ((responses as { Error?: unknown }[] | undefined)?.[j]?.Error) {
        c.failed += 1;
        c.writeTable += 1;
        return;
      }
      const id = itemId(action.table, action.key);
      this.#itemWrite(c, action.table, before.get(id), after.get(id), 1);
    });
  }

  /** One item's write: `rate` × its size on the table, and each index's write at the standard rate. */
  #itemWrite(
    c: Counter,
    table: string,
    old: AttributeMap | undefined,
    now: AttributeMap | undefined,
    rate: number,
  ): void {
    c.writeTable += rate * Math.max(1, kb(Math.max(itemBytes(old), itemBytes(now))));
    for (const index of specOf(table)?.globalIndexes ?? []) {
      const names = [index.partitionKey.name, ...(index.sortKey ? [index.sortKey.name] : [])];
      const keyOf = (item: AttributeMap | undefined) =>
        item && names.every((n) => item[n] !== undefined)
          ? JSON.stringify(names.map((n) => item[n]))
          : undefined;
      const was = keyOf(old);
      const is = keyOf(now);
      // A keys-only index holds the keys alone (1 KB at most here), and a change that keeps them writes nothing to it.
      const keysOnly = index.projection === 'keys-only';
      const entry = (item: AttributeMap | undefined) => (keysOnly ? 1 : kb(itemBytes(item)));
      if (was && is && was !== is) c.writeIndex += entry(old) + entry(now);
      else if (was && is && !keysOnly && JSON.stringify(old) !== JSON.stringify(now))
        c.writeIndex += kb(Math.max(itemBytes(old), itemBytes(now)));
      else if (was && !is) c.writeIndex += entry(old);
      else if (!was && is) c.writeIndex += entry(now);
    }
  }

  /** The current state of a transaction's (or a PartiQL batch's) items (consistent reads, not counted). */
  async #read(operation: string, input: Record<string, unknown>): Promise<ItemStates> {
    this.#reader ??= new DynamoDBClient({});
    const byTable = new Map<string, AttributeMap[]>();
    const actions = operation === 'BatchExecuteStatement' ? statementActions(input) : transactActions(input);
    for (const action of actions) {
      const keys = byTable.get(action.table) ?? [];
      keys.push(action.key);
      byTable.set(action.table, keys);
    }
    const states: ItemStates = new Map();
    for (const [table, keys] of byTable) {
      let pending: AttributeMap[] | undefined = keys;
      while (pending && pending.length > 0) {
        const out = await this.#reader.send(
          new BatchGetItemCommand({ RequestItems: { [table]: { Keys: pending, ConsistentRead: true } } }),
        );
        for (const item of out.Responses?.[table] ?? []) {
          const spec = specOf(table);
          if (spec) states.set(itemId(table, keyFrom(spec, item as AttributeMap)), item as AttributeMap);
        }
        pending = out.UnprocessedKeys?.[table]?.Keys as AttributeMap[] | undefined;
      }
    }
    return states;
  }

  /** A transaction (or PartiQL batch) whose items could not be read: 2 (1) WCU per item, its index writes unknown. */
  #unmeasured(key: string, operation: string, input: Record<string, unknown>): void {
    const c = this.#counter(key);
    c.unmeasured += 1;
    c.writeTable += (operation === 'TransactWriteItems' ? 2 : 1) * itemsIn(operation, input);
  }

  #refused(key: string, operation: string, input: Record<string, unknown>, dynamo: boolean): void {
    const c = this.#counter(key);
    c.requests += 1;
    c.failed += 1;
    if (!dynamo || READS.test(operation)) return;
    const items = itemsIn(operation, input);
    c.items += items;
    c.writeTable += operation === 'TransactWriteItems' ? 2 * items : Math.max(1, items);
  }
}

/** Operations whose write units are computed item by item from the items' states before and after. */
const ITEM_BY_ITEM = new Set(['TransactWriteItems', 'BatchExecuteStatement']);

const COMPONENT = Symbol('benchComponent') as unknown as string;
const PRINCIPAL = Symbol('benchPrincipal') as unknown as string;

type AttributeMap = Record<string, AttributeValue>;
type ItemStates = Map<string, AttributeMap>;

interface TransactAction {
  readonly kind: 'Put' | 'Update' | 'Delete' | 'ConditionCheck';
  readonly table: string;
  readonly key: AttributeMap;
}

/** The table and key of each action of a (marshalled) TransactWriteItems input. */
function transactActions(input: Record<string, unknown>): TransactAction[] {
  const out: TransactAction[] = [];
  for (const item of (input.TransactItems ?? []) as Record<string, Record<string, unknown>>[]) {
    for (const kind of ['Put', 'Update', 'Delete', 'ConditionCheck'] as const) {
      const action = item[kind];
      if (!action) continue;
      const table = action.TableName as string;
      const spec = specOf(table);
      const key =
        kind === 'Put' && spec
          ? keyFrom(spec, action.Item as AttributeMap)
          : asAttributes(action.Key as Record<string, unknown>);
      out.push({ kind, table, key });
    }
  }
  return out;
}

/**
 * The table and key of each statement of a (marshalled) PartiQL batch: the table after `UPDATE`,
 * `INSERT INTO` or `DELETE FROM`, each key attribute's value from the parameter its `"name" = ?`
 * in the `WHERE` takes (by position).
 */
function statementActions(input: Record<string, unknown>): TransactAction[] {
  const out: TransactAction[] = [];
  for (const s of (input.Statements ?? []) as { Statement: string; Parameters?: unknown[] }[]) {
    const table = /^\s*(?:UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+"?([\w.-]+)"?/i.exec(s.Statement)?.[1];
    const spec = table ? specOf(table) : undefined;
    if (!table || !spec) continue;
    const where = s.Statement.search(/\bWHERE\b/i);
    const key: Record<string, unknown> = {};
    for (const name of [spec.partitionKey.name, ...(spec.sortKey ? [spec.sortKey.name] : [])]) {
      const m = new RegExp(`"?\\b${name}\\b"?\\s*=\\s*\\?`).exec(s.Statement.slice(where));
      if (!m) continue;
      const position = (s.Statement.slice(0, where + m.index + m[0].length).match(/\?/g) ?? []).length - 1;
      key[name] = (s.Parameters as unknown[] | undefined)?.[position];
    }
    out.push({ kind: 'Update', table, key: asAttributes(key) });
  }
  return out;
}

/** The spec of a table by its physical name (`{prefix}-{stage}-{id}`). */
function specOf(table: string): TableSpec | undefined {
  return tables.find((t) => table.endsWith(`-${t.id}`));
}

function keyFrom(spec: TableSpec, item: AttributeMap): AttributeMap {
  const key: AttributeMap = { [spec.partitionKey.name]: item[spec.partitionKey.name]! };
  if (spec.sortKey) key[spec.sortKey.name] = item[spec.sortKey.name]!;
  return asAttributes(key);
}

/** A key as AttributeValues, whether the input was marshalled yet (DocumentClient) or not. */
function asAttributes(key: Record<string, unknown>): AttributeMap {
  const out: AttributeMap = {};
  for (const [name, value] of Object.entries(key)) {
    if (typeof value === 'string') out[name] = { S: value };
    else if (typeof value === 'number') out[name] = { N: String(value) };
    else out[name] = value as AttributeValue;
  }
  return out;
}

const itemId = (table: string, key: AttributeMap) => `${table} ${JSON.stringify(Object.entries(key).sort())}`;

const kb = (bytes: number) => Math.ceil(bytes / 1024);

/** DynamoDB's size of an item: names plus values (AWS's rules, numbers approximated). */
function itemBytes(item: AttributeMap | undefined): number {
  if (!item) return 0;
  let bytes = 0;
  for (const [name, value] of Object.entries(item)) bytes += Buffer.byteLength(name) + valueBytes(value);
  return bytes;
}

function valueBytes(v: AttributeValue): number {
  if (v.S !== undefined) return Buffer.byteLength(v.S);
  if (v.N !== undefined) return Math.ceil(v.N.replace(/[^0-9]/g, '').length / 2) + 1;
  if (v.B !== undefined) return v.B.length;
  if (v.BOOL !== undefined || v.NULL !== undefined) return 1;
  if (v.SS) return v.SS.reduce((n, s) => n + Buffer.byteLength(s), 0);
  if (v.NS) return v.NS.reduce((n, s) => n + Math.ceil(s.length / 2) + 1, 0);
  if (v.BS) return v.BS.reduce((n, b) => n + b.length, 0);
  if (v.L) return 3 + v.L.reduce((n, e) => n + 1 + valueBytes(e), 0);
  if (v.M)
    return 3 + Object.entries(v.M).reduce((n, [k, e]) => n + 1 + Buffer.byteLength(k) + valueBytes(e), 0);
  return 0;
}

/** Items a batch or transaction carries (1 for a single-item request). */
function itemsIn(operation: string, input: Record<string, unknown>): number {
  if (operation === 'TransactWriteItems' || operation === 'TransactGetItems')
    return (input.TransactItems as unknown[] | undefined)?.length ?? 0;
  if (operation === 'BatchWriteItem')
    return Object.values((input.RequestItems ?? {}) as Record<string, unknown[]>).reduce(
      (n, l) => n + l.length,
      0,
    );
  if (operation === 'BatchGetItem')
    return Object.values((input.RequestItems ?? {}) as Record<string, { Keys: unknown[] }>).reduce(
      (n, l) => n + l.Keys.length,
      0,
    );
  if (operation === 'BatchExecuteStatement') return (input.Statements as unknown[] | undefined)?.length ?? 0;
  if (operation === 'SendMessageBatch' || operation === 'DeleteMessageBatch')
    return (input.Entries as unknown[] | undefined)?.length ?? 0;
  return 1;
}

/**
 * The project's adapters on the call's stack, innermost first, joined by `<`
 * (`dynamo-message-table<dynamo-message-claims`); without one, the first project module that made
 * the call (`shared/fleet/job-manager`); `-` when none is found.
 */
function componentOf(stack: string): string {
  const lines = stack.split('\n').filter((l) => !/aws-meter|aws-clients|node_modules/.test(l));
  const adapters: string[] = [];
  for (const line of lines) {
    const m = /shared\/adapters\/([\w-]+)\.ts/.exec(line);
    if (m && !adapters.includes(m[1]!)) adapters.push(m[1]!);
  }
  if (adapters.length > 0) return adapters.join('<');
  const own = /\/(shared|lambdas|worker|local|bench)\/([\w\-/]+)\.ts/.exec(lines.join('\n'));
  return own ? `${own[1]}/${own[2]}` : '-';
}

/** `after - before`, key by key (counters only grow). */
export function diffTally(after: Tally, before: Tally): Tally {
  const out: Tally = {};
  for (const [key, a] of Object.entries(after)) {
    const b = before[key] ?? emptyCounter();
    const d = emptyCounter();
    for (const field of Object.keys(d) as (keyof Counter)[]) d[field] = a[field] - b[field];
    if (d.requests !== 0) out[key] = d;
  }
  return out;
}

/** The sum of several tallies (this process's and each broker's). */
export function addTallies(...tallies: Tally[]): Tally {
  const out: Tally = {};
  for (const t of tallies) {
    for (const [key, c] of Object.entries(t)) {
      out[key] ??= emptyCounter();
      const o = out[key];
      for (const field of Object.keys(o) as (keyof Counter)[]) o[field] += c[field];
    }
  }
  return out;
}

/** Sums the counters whose key passes `filter`. */
export function sumWhere(tally: Tally, filter: (key: MeterKey) => boolean): Counter {
  const out = emptyCounter();
  for (const [key, c] of Object.entries(tally)) {
    if (!filter(splitKey(key))) continue;
    for (const field of Object.keys(out) as (keyof Counter)[]) out[field] += c[field];
  }
  return out;
}

/** Total write units (table + index) of a counter. */
export const writeUnits = (c: Counter) => c.writeTable + c.writeIndex;
