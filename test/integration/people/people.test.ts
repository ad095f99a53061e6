/**
 * People on DynamoDB Local: identifiers linked into one person by rows, concurrently and in any
 * order (`DynamoPeopleStore`), and contact limits counted per person where a contact starts — a
 * call's start transaction and an email's claim — so that one customer reached on two channels
 * under a limit of 1 is contacted once.
 */
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { createTable } from '#local/cloud.ts';
import { DynamoBrokerTaskStore } from '#shared/adapters/dynamo-call-tasks.ts';
import { DynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import { DynamoMessageTaskStore } from '#shared/adapters/dynamo-message-tasks.ts';
import { DynamoPeopleStore } from '#shared/adapters/dynamo-people.ts';
import { claimSuppressions } from '#shared/adapters/dynamo-person-suppressions.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import { type ContactLimit, capSlots } from '#shared/contact-limits/model.ts';
import { type ClientSettings, type Job, type JobChannel, keys, type Task } from '#shared/jobs/model.ts';
import { personKeys } from '#shared/people/model.ts';
import { tableSpec } from '#shared/resources.ts';
import { testCloud } from '../../support/cloud.ts';
import { ALWAYS_OPEN } from '../../support/seed-jobs.ts';
import { readTasks } from '../../support/task-table.ts';

const cloud = testCloud();
const stage = `ppl${process.pid}${Math.random().toString(36).slice(2, 6)}`.slice(0, 20);
let controlTable: string;
let tasksTable: string;
let people: DynamoPeopleStore;

beforeAll(async () => {
  [controlTable, tasksTable] = await Promise.all([
    createTable(cloud.ddb, stage, tableSpec('control')),
    createTable(cloud.ddb, stage, tableSpec('tasks')),
  ]);
  people = new DynamoPeopleStore(cloud.doc, controlTable);
});

const phone = (i: number) => `+8190${String(30_000_000 + i)}`;
const mail = (i: number) => `person${i}@example.jp`;
const line = (i: number) => `U${i.toString(16).padStart(32, '0')}`;

/** Every link of `identifiers` names one person whose members are exactly them. */
async function expectOnePerson(clientId: string, identifiers: readonly string[]) {
  const links = await Promise.all(
    identifiers.map(async (id) => {
      const out = await cloud.doc.send(
        new GetCommand({ TableName: controlTable, Key: personKeys.link(clientId, id), ConsistentRead: true }),
      );
      return out.Item?.person as string | undefined;
    }),
  );
  const [person] = links;
  expect(person).toMatch(/^P[0-9A-Z]{26}$/);
  expect(new Set(links)).toEqual(new Set([person]));
  const members = await cloud.doc.send(
    new GetCommand({
      TableName: controlTable,
      Key: personKeys.members(clientId, person!),
      ConsistentRead: true,
    }),
  );
  expect([...((members.Item?.members as string[] | undefined) ?? [])].sort()).toEqual(
    [...identifiers].sort(),
  );
  return person!;
}

describe('linking identifiers', () => {
  it('joins rows that share an identifier into one person, transitively, and is idempotent', async () => {
    const clientId = 'ppl-rows';
    const first = await people.link(clientId, [[phone(1), mail(1)], [phone(2)]]);
    const p = first.persons.get(phone(1));
    expect(first.persons.get(mail(1))).toBe(p);
    // A lone identifier is its own person: nothing written, not in the answer.
    expect(first.persons.has(phone(2))).toBe(false);
    const second = await people.link(clientId, [[mail(1), line(1)]]);
    expect(second.persons.get(line(1))).toBe(p);
    expect(await expectOnePerson(clientId, [phone(1), mail(1), line(1)])).toBe(p);
    const again = await people.link(clientId, [[line(1), phone(1)], [mail(1)]]);
    expect([...again.persons.values()]).toEqual([p, p, p]);
    expect(await people.person(clientId, mail(1))).toEqual({
      person: p,
      identifiers: [phone(1), mail(1), line(1)],
    });
    expect(await people.person(clientId, phone(2))).toEqual({ person: phone(2), identifiers: [phone(2)] });
  });

  it('merges two persons a row joins into the larger; an unlinked identifier leaves its person', async () => {
    const clientId = 'ppl-merge';
    await people.link(clientId, [[phone(1), mail(1), line(1)]]);
    await people.link(clientId, [[phone(2), mail(2)]]);
    const larger = (await people.person(clientId, phone(1))).person;
    await people.link(clientId, [[mail(2), line(1)]]);
    expect(await expectOnePerson(clientId, [phone(1), mail(1), line(1), phone(2), mail(2)])).toBe(larger);
    expect(await people.unlink(clientId, mail(2))).toBe(true);
    expect(await people.unlink(clientId, mail(2))).toBe(false);
    expect(await people.person(clientId, mail(2))).toEqual({ person: mail(2), identifiers: [mail(2)] });
    expect(await expectOnePerson(clientId, [phone(1), mail(1), line(1), phone(2)])).toBe(larger);
  });

  it('links a page whose rows each touch one known person through a different identifier in one write, not a race', async () => {
    const clientId = 'ppl-page';
    const known = Array.from({ length: 10 }, (_, i) => phone(100 + i));
    await people.link(clientId, [known]);
    const rows = known.map((id, i) => [id, mail(100 + i)]);
    const { persons, refused } = await people.link(clientId, rows);
    expect(refused).toEqual([]);
    const person = await expectOnePerson(clientId, rows.flat());
    expect(new Set(persons.values())).toEqual(new Set([person]));
  });

  it('mends a link whose person is gone: the row’s identifiers end one person, none lost', async () => {
    const clientId = 'ppl-dangling';
    await cloud.doc.send(
      new PutCommand({
        TableName: controlTable,
        Item: { ...personKeys.link(clientId, phone(50)), person: `P01J${'Z'.repeat(23)}` },
      }),
    );
    await people.link(clientId, [[phone(50), mail(50)]]);
    await expectOnePerson(clientId, [phone(50), mail(50)]);
  });

  it('ends as one person when many writers link overlapping rows at once', async () => {
    const clientId = 'ppl-race';
    // A chain: row i links phone(i) and phone(i+1); every writer races every other.
    const rows = Array.from({ length: 12 }, (_, i) => [phone(i), phone(i + 1)]);
    await Promise.all(rows.map((row) => people.link(clientId, [row])));
    await expectOnePerson(
      clientId,
      Array.from({ length: 13 }, (_, i) => phone(i)),
    );
  });
});

const ONE_A_DAY: ContactLimit = { max: 1, per: { days: 1 }, channels: ['call', 'email'] };

async function putClient(clientId: string): Promise<ClientSettings> {
  const client: ClientSettings = {
    clientId,
    maxConcurrentCalls: 4,
    callsPerSecond: 4,
    timeZone: 'Asia/Tokyo',
    callingHours: ALWAYS_OPEN,
    defaultRegion: 'JP',
    email: { from: 'news@shop.example' },
    contactLimits: [ONE_A_DAY],
    updatedAt: Date.now(),
  };
  await cloud.doc.send(
    new PutCommand({ TableName: controlTable, Item: { ...keys.client(clientId), ...client } }),
  );
  return client;
}

/** A running job of `channel` with one task to `recipient`, its person as the ingest read it. */
async function putJob(clientId: string, channel: JobChannel, recipient: string, person: string | undefined) {
  const now = Date.now();
  const job: Job = {
    clientId,
    jobId:
      `01JP${clientId.toUpperCase().replace(/[^0-9A-Z]/g, '')}${channel.toUpperCase()}${'0'.repeat(26)}`.slice(
        0,
        26,
      ),
    name: `${channel} to one person`,
    channel,
    scenarioId: 's1',
    ...(channel === 'email' ? { email: { subject: 'hi', text: 'hello' } } : {}),
    ...(channel === 'line' ? { message: { messages: [{ type: 'text' as const, text: 'hi' }] } } : {}),
    startAt: now - 1000,
    endAt: now + 10 * 60_000,
    maxAttempts: 1,
    retryDelaySeconds: 1,
    status: 'running',
    counts: { rows: 1, rejected: 0, skipped: 0, tasks: 1, completed: 0, failed: 0, cancelled: 0 },
    createdAt: now,
    updatedAt: now,
  };
  await cloud.doc.send(
    new PutCommand({
      TableName: controlTable,
      Item: { ...keys.job(clientId, job.jobId), ...job, ...keys.jobStatusIndex(job) },
    }),
  );
  const task: Task = {
    clientId,
    jobId: job.jobId,
    taskId: 't0001',
    row: 2,
    channel: channel === 'call' ? 'call' : 'message',
    recipient,
    ...(person ? { person } : {}),
    variables: {},
    state: 'pending',
    attempts: 0,
    readyAt: now - 1000,
    updatedAt: now,
  };
  await cloud.doc.send(
    new PutCommand({
      TableName: tasksTable,
      Item: { ...keys.task(task.jobId, task.taskId), ...task, ...keys.outstandingIndex(task) },
    }),
  );
  return { job, task };
}

/** A call's start and an email's claim for one person, at once; what each did. */
async function callAndEmail(clientId: string, persons: { call?: string; email?: string }) {
  const client = await putClient(clientId);
  const call = await putJob(clientId, 'call', phone(7), persons.call);
  const email = await putJob(clientId, 'email', mail(7), persons.email);
  const leases = new DynamoLeaseStore(cloud.doc, controlTable, { endpoint: 'http://127.0.0.1:9' });
  const lease = await leases.tryTake({ clientId, owner: 'both', now: Date.now(), leaseMs: 60_000 });
  const now = Date.now();
  const calls = new DynamoBrokerTaskStore(cloud.doc, { controlTable, tasksTable });
  const messages = new DynamoMessageTaskStore(cloud.doc, {
    controlTable,
    tasksTable,
    clock: { now: () => Date.now() },
  });
  const session = messages.session({ clientId, owner: 'both', token: () => lease!.token });
  const [started, claimed] = await Promise.all([
    calls.start(
      call.task,
      { clientId, owner: 'both', token: lease!.token, now },
      { slots: capSlots(client.contactLimits, 'call', now, client.timeZone), jobEndAt: call.job.endAt! },
    ),
    session.source.nextPage(10),
  ]);
  const [emailTask] = await readTasks<Task>(cloud.doc, tasksTable, email.job.jobId);
  return { started: started.kind, claimed: claimed.length, emailTask: emailTask! };
}

/** Refused by a limit: ended capped, or waiting for the window's end (near midnight in Tokyo, the job outlives the day). */
const isCapped = (task: Task) =>
  (task.state === 'cancelled' && task.lastResult === 'capped') ||
  (task.state === 'pending' && task.reason?.startsWith('capped: waiting until ') === true);

describe('a contact limit over two channels, for one person', () => {
  it('lets a call and an email to one customer’s phone and address, started at once, through once', async () => {
    const clientId = 'ppl-cap';
    const { persons } = await people.link(clientId, [[phone(7), mail(7)]]);
    const person = persons.get(phone(7))!;
    const { started, claimed, emailTask } = await callAndEmail(clientId, { call: person, email: person });
    expect([started === 'started', claimed === 1].filter(Boolean)).toHaveLength(1);
    // Refused by the limit: ended capped, or (when the day's window ends before the job does)
    // waiting for the next window.
    if (started === 'started') expect(isCapped(emailTask)).toBe(true);
  });

  it('counts under the person as it is at the start, even when the task was read before the link', async () => {
    const clientId = 'ppl-late';
    // The tasks were written while both were strangers; the link came after.
    await people.link(clientId, [[phone(7), mail(7)]]);
    const { started, claimed, emailTask } = await callAndEmail(clientId, {});
    const contacts = (started === 'started' ? 1 : 0) + claimed;
    if (claimed === 0) {
      // The claim found the link changed: the task takes its person and is claimed again, over the cap.
      const person = (await people.person(clientId, mail(7))).person;
      expect(emailTask.person).toBe(person);
      const leases = new DynamoLeaseStore(cloud.doc, controlTable, { endpoint: 'http://127.0.0.1:9' });
      const lease = await leases.tryTake({ clientId, owner: 'both', now: Date.now(), leaseMs: 60_000 });
      const messages = new DynamoMessageTaskStore(cloud.doc, {
        controlTable,
        tasksTable,
        clock: { now: () => Date.now() },
      });
      const again = await messages
        .session({ clientId, owner: 'both', token: () => lease!.token })
        .source.nextPage(10);
      expect(contacts + again.length).toBe(1);
    } else expect(contacts).toBe(1);
  });
});

describe('a suppression that reaches the person', () => {
  /** A client whose unfollows reach the person, or not, with `U…` and an address linked into one person. */
  async function linkedClient(clientId: string, scope: 'person' | 'channel') {
    const client = await putClient(clientId);
    await cloud.doc.send(
      new PutCommand({
        TableName: controlTable,
        Item: { ...keys.client(clientId), ...client, suppressionScope: { 'line-unfollow': scope } },
      }),
    );
    const { persons } = await people.link(clientId, [[line(9), mail(7), phone(7)]]);
    return persons.get(mail(7))!;
  }

  async function claimEmail(clientId: string, person: string) {
    await putJob(clientId, 'email', mail(7), person);
    const leases = new DynamoLeaseStore(cloud.doc, controlTable, { endpoint: 'http://127.0.0.1:9' });
    const lease = await leases.tryTake({ clientId, owner: 'mailer', now: Date.now(), leaseMs: 60_000 });
    const messages = new DynamoMessageTaskStore(cloud.doc, {
      controlTable,
      tasksTable,
      clock: { now: () => Date.now() },
      suppressed: claimSuppressions(cloud.doc, controlTable),
    });
    return messages.session({ clientId, owner: 'mailer', token: () => lease!.token }).source.nextPage(10);
  }

  const unfollow = (clientId: string) =>
    new DynamoSuppressionStore(cloud.doc, controlTable).add(clientId, [
      {
        recipient: line(9),
        kind: 'line',
        source: 'line-unfollow',
        reason: 'unfollowed',
        addedAt: Date.now(),
      },
    ]);

  it('does not email a person who unfollowed on LINE when the client makes unfollows person-wide', async () => {
    const clientId = 'ppl-unfollow';
    const person = await linkedClient(clientId, 'person');
    await unfollow(clientId);
    const [claimed] = await claimEmail(clientId, person);
    expect(claimed?.suppressed).toBe('suppressed: line-unfollow (another identifier of the same person)');
  });

  it('still emails them by default: an unfollow says the LINE account no longer reaches them, not that they said no', async () => {
    const clientId = 'ppl-unfollow-default';
    const person = await linkedClient(clientId, 'channel');
    await unfollow(clientId);
    const [claimed] = await claimEmail(clientId, person);
    expect(claimed?.suppressed).toBeUndefined();
  });

  it('ends a call to a person whose address unsubscribed (person-wide by default), with the reason', async () => {
    const clientId = 'ppl-unsubscribed';
    const person = await linkedClient(clientId, 'channel');
    await new DynamoSuppressionStore(cloud.doc, controlTable).add(clientId, [
      { recipient: mail(7), kind: 'email', source: 'unsubscribe', reason: 'one click', addedAt: Date.now() },
    ]);
    const { job, task } = await putJob(clientId, 'call', phone(7), person);
    const leases = new DynamoLeaseStore(cloud.doc, controlTable, { endpoint: 'http://127.0.0.1:9' });
    const lease = await leases.tryTake({ clientId, owner: 'caller', now: Date.now(), leaseMs: 60_000 });
    const calls = new DynamoBrokerTaskStore(cloud.doc, { controlTable, tasksTable });
    const result = await calls.start(task, {
      clientId,
      owner: 'caller',
      token: lease!.token,
      now: Date.now(),
    });
    const reason = 'suppressed: unsubscribe (another identifier of the same person)';
    expect(result).toEqual({ kind: 'suppressed', reason });
    const [after] = await readTasks<Task>(cloud.doc, tasksTable, job.jobId);
    expect(after).toMatchObject({ state: 'cancelled', reason });
  });
});

describe('a person linked after the ingest, and a suppressed task under a limit', () => {
  const leaseOf = async (clientId: string, owner: string) =>
    (await new DynamoLeaseStore(cloud.doc, controlTable, { endpoint: 'http://127.0.0.1:9' }).tryTake({
      clientId,
      owner,
      now: Date.now(),
      leaseMs: 60_000,
    }))!;
  const messagesOf = (clientId: string, owner: string, token: number) =>
    new DynamoMessageTaskStore(cloud.doc, {
      controlTable,
      tasksTable,
      clock: { now: () => Date.now() },
      suppressed: claimSuppressions(cloud.doc, controlTable),
    }).session({ clientId, owner, token: () => token });

  it('ends a call whose task was read before the link, when the linked address unsubscribed', async () => {
    const clientId = 'ppl-late-unsub';
    await putClient(clientId);
    const { task } = await putJob(clientId, 'call', phone(7), undefined);
    await people.link(clientId, [[phone(7), mail(7)]]);
    await new DynamoSuppressionStore(cloud.doc, controlTable).add(clientId, [
      { recipient: mail(7), kind: 'email', source: 'unsubscribe', reason: 'one click', addedAt: Date.now() },
    ]);
    const lease = await leaseOf(clientId, 'caller');
    const calls = new DynamoBrokerTaskStore(cloud.doc, { controlTable, tasksTable });
    const result = await calls.start(task, {
      clientId,
      owner: 'caller',
      token: lease.token,
      now: Date.now(),
    });
    expect(result).toEqual({
      kind: 'suppressed',
      reason: 'suppressed: unsubscribe (another identifier of the same person)',
    });
  });

  it('a call start whose reading ahead predates a link reads the new person before it tries again: its address unsubscribed', async () => {
    const clientId = 'ppl-relinked-unsub';
    const client = await putClient(clientId);
    // The client has people (its starts read them); this recipient is a stranger when read ahead.
    await people.link(clientId, [[phone(8), mail(8)]]);
    const { job, task } = await putJob(clientId, 'call', phone(7), undefined);
    const calls = new DynamoBrokerTaskStore(cloud.doc, { controlTable, tasksTable });
    await calls.prepare(task);
    // Then, within the reading's second: linked to an address, which unsubscribes.
    await people.link(clientId, [[phone(7), mail(7)]]);
    await new DynamoSuppressionStore(cloud.doc, controlTable).add(clientId, [
      { recipient: mail(7), kind: 'email', source: 'unsubscribe', reason: 'one click', addedAt: Date.now() },
    ]);
    const lease = await leaseOf(clientId, 'caller');
    const now = Date.now();
    // The start's link check refuses the stranger's count; the start reads the person it is now.
    const result = await calls.start(
      task,
      { clientId, owner: 'caller', token: lease.token, now },
      { slots: capSlots(client.contactLimits, 'call', now, client.timeZone), jobEndAt: job.endAt! },
    );
    expect(result).toEqual({
      kind: 'suppressed',
      reason: 'suppressed: unsubscribe (another identifier of the same person)',
    });
  });

  it('does not push on LINE to a person whose address unsubscribed, though the LINE task has no person', async () => {
    const clientId = 'ppl-line-unsub';
    await putClient(clientId);
    const { job } = await putJob(clientId, 'line', line(7), undefined);
    await people.link(clientId, [[line(7), mail(7)]]);
    await new DynamoSuppressionStore(cloud.doc, controlTable).add(clientId, [
      { recipient: mail(7), kind: 'email', source: 'unsubscribe', reason: 'one click', addedAt: Date.now() },
    ]);
    const lease = await leaseOf(clientId, 'pusher');
    const [claimed] = await messagesOf(clientId, 'pusher', lease.token).source.nextPage(10);
    expect(claimed?.jobId).toBe(job.jobId);
    expect(claimed?.suppressed).toBe('suppressed: unsubscribe (another identifier of the same person)');
  });

  it('takes no slot of the person’s limit for an email that ends suppressed: the call still goes', async () => {
    const clientId = 'ppl-bounced';
    const client = await putClient(clientId);
    const { persons } = await people.link(clientId, [[phone(7), mail(7)]]);
    const person = persons.get(phone(7))!;
    // A bounce stays on its address: the person may still be called.
    await new DynamoSuppressionStore(cloud.doc, controlTable).add(clientId, [
      { recipient: mail(7), kind: 'email', source: 'bounce', reason: 'gone', addedAt: Date.now() },
    ]);
    await putJob(clientId, 'email', mail(7), person);
    const lease = await leaseOf(clientId, 'both');
    const [emailed] = await messagesOf(clientId, 'both', lease.token).source.nextPage(10);
    expect(emailed?.suppressed).toBe('suppressed: bounce');
    const { job, task } = await putJob(clientId, 'call', phone(7), person);
    const now = Date.now();
    const calls = new DynamoBrokerTaskStore(cloud.doc, { controlTable, tasksTable });
    const started = await calls.start(
      task,
      { clientId, owner: 'both', token: lease.token, now },
      { slots: capSlots(client.contactLimits, 'call', now, client.timeZone), jobEndAt: job.endAt! },
    );
    expect(started.kind).toBe('started');
  });
});
