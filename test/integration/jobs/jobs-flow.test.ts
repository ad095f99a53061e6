/**
 * The jobs flow on the local cloud: the operator API behind the API Gateway stand-in, uploads
 * through presigned URLs, the S3 notifier, and the ingest Lambda polling its queue — the same
 * handlers AWS runs — against DynamoDB Local and fauxqs.
 */
import { readFileSync } from 'node:fs';
import { HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { beforeAll, describe, expect, it } from 'vitest';
import { s3EventNotification } from '#local/s3-notifier.ts';
import { DynamoClientStore } from '#shared/adapters/dynamo-clients.ts';
import { DynamoTaskStore } from '#shared/adapters/dynamo-job-tasks.ts';
import { DynamoJobStore } from '#shared/adapters/dynamo-jobs.ts';
import { DynamoOptOutStore } from '#shared/adapters/dynamo-opt-outs.ts';
import { S3UploadFiles, S3ValidationReportStore } from '#shared/adapters/s3-uploads.ts';
import { recipientTaskId } from '#shared/csv/duplicates.ts';
import { newUlid } from '#shared/ids.ts';
import { JobsApi, ZERO_COUNTS } from '#shared/jobs/api.ts';
import { type IngestMessage, JobIngest } from '#shared/jobs/ingest.ts';
import { keys, type Task, taskShard } from '#shared/jobs/model.ts';
import type { ContinueIngestMessage } from '#shared/jobs/ports.ts';
import { silentLogger } from '#shared/log.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';
import { CLIENT, eventually, useJobsApi } from '../../support/jobs-api.ts';
import { readTasks } from '../../support/task-table.ts';

const cloud = testCloud();
const controlTable = cloud.info.tableNames.control!;
const tasksTable = cloud.info.tableNames.tasks!;
const mixedList = readFileSync(new URL('../../fixtures/jobs/mixed-list.csv', import.meta.url));
const harness = useJobsApi(cloud);
const { call } = harness;
let bucket: string;
beforeAll(() => {
  bucket = harness.uploadsBucket();
});

const jobIn = (clientId: string, jobId: string, statuses: string[]) =>
  eventually(
    async () => {
      const job = await call('GET', `/clients/${clientId}/jobs/${jobId}`);
      return statuses.includes(job.body.status) ? job.body : undefined;
    },
    `job ${jobId} to be ${statuses.join('|')}`,
  );

async function newClient(): Promise<string> {
  const clientId = uniqueName('acme');
  expect((await call('PUT', `/clients/${clientId}`, CLIENT)).status).toBe(200);
  return clientId;
}

const tasksOf = (jobId: string) => readTasks<Task & { openSk?: string }>(cloud.doc, tasksTable, jobId);

describe('a list uploaded through the presigned URL', () => {
  it('becomes a scheduled job with the exact counts, outstanding tasks and a report', async () => {
    const clientId = await newClient();
    await new DynamoOptOutStore(cloud.doc, controlTable).record(clientId, '+819011110004', true, Date.now());
    const created = await call('POST', `/clients/${clientId}/jobs`, { name: 'March', scenarioId: 'renewal' });
    expect(created.status).toBe(201);
    const { jobId, upload } = created.body;
    const put = await fetch(upload.url, {
      method: upload.method,
      body: mixedList,
      headers: { 'content-type': 'text/csv' },
    });
    expect(put.status).toBe(200);

    const job = await jobIn(clientId, jobId, ['scheduled', 'failed']);
    expect(job).toMatchObject({ status: 'scheduled', name: 'March', scenarioId: 'renewal' });
    expect(job.counts).toEqual({
      rows: 9,
      rejected: 3,
      skipped: 2,
      tasks: 4,
      completed: 0,
      failed: 0,
      cancelled: 0,
      expired: 0,
      outstanding: 4,
    });

    const tasks = await tasksOf(jobId);
    expect(tasks.map((t) => [t.row, t.recipient, t.state])).toEqual([
      [2, '+819011110001', 'pending'],
      [3, '+819011110002', 'pending'],
      [7, '+819011110003', 'pending'],
      [11, '+819011110006', 'pending'],
    ]);
    for (const task of tasks) {
      const taskId = recipientTaskId(jobId, task.recipient as string);
      expect(task).toMatchObject({
        ...keys.task(jobId, taskId),
        taskId,
        clientId,
        jobId,
        openPk: `${clientId}#${taskShard(taskId)}`,
      });
      expect(task.openSk).toBe(`${new Date(task.readyAt as number).toISOString()}#${jobId}#${taskId}`);
    }

    const report = await call('GET', `/clients/${clientId}/jobs/${jobId}/report`);
    expect(report.status).toBe(200);
    const lines = (report.body as string)
      .replace(/^\ufeff/, '')
      .trimEnd()
      .split('\r\n');
    expect(lines[0]).toBe('row,recipient,outcome,attempts,last_result,reason,column,value');
    expect(lines.slice(1, 6)).toEqual([
      '4,,rejected,0,,invalid phone number,phone,abc',
      '5,,skipped,0,,duplicate of row 2,phone,090-1111-0001',
      '6,,rejected,0,,phone is empty,phone,',
      '8,,skipped,0,,opted out,phone,090-1111-0004',
      '9,,rejected,0,,"expected 3 columns, got 2",,',
    ]);
    expect(lines.slice(6).sort()).toEqual([
      "11,'+819011110006,pending,0,,,,",
      "2,'+819011110001,pending,0,,,,",
      "3,'+819011110002,pending,0,,,,",
      "7,'+819011110003,pending,0,,,,",
    ]);
  });

  it('an SMS job: the mobile number column by its Japanese header, each number in E.164, the text kept', async () => {
    const clientId = uniqueName('texts');
    const sms = { originationIdentity: '+815012345678', partsPerSecond: 10 };
    expect((await call('PUT', `/clients/${clientId}`, { ...CLIENT, sms })).status).toBe(200);
    const body = '{{name}}様、明日10時のご予約です。ポイント{{ポイント}}';
    const created = await call('POST', `/clients/${clientId}/jobs`, {
      name: 'reminder',
      channel: 'sms',
      sms: { body },
    });
    expect(created.status).toBe(201);
    const { jobId, upload } = created.body;
    const list =
      'お名前,携帯電話番号,ポイント\r\n山田,090-1111-0001,10\r\n佐藤,０８０－２２２２－０００２,20\r\n鈴木,abc,30\r\n';
    expect((await fetch(upload.url, { method: upload.method, body: list })).status).toBe(200);
    const job = await jobIn(clientId, jobId, ['scheduled', 'running', 'failed']);
    expect(job).toMatchObject({ channel: 'sms', sms: { body } });
    expect(job.counts).toMatchObject({ rows: 3, rejected: 1, tasks: 2 });
    const tasks = await tasksOf(jobId);
    // The name column is the task's name (`{{name}}`); the others its variables.
    expect(tasks.map((t) => [t.recipient, t.channel, t.name, t.variables])).toEqual([
      ['+819011110001', 'message', '山田', { ポイント: '10' }],
      ['+818022220002', 'message', '佐藤', { ポイント: '20' }],
    ]);

    // A list with no number column fails with one reason that names the headers it has.
    const noNumbers = await call('POST', `/clients/${clientId}/jobs`, {
      name: 'x',
      channel: 'sms',
      sms: { body },
    });
    const put = noNumbers.body.upload;
    await fetch(put.url, { method: put.method, body: 'お名前,メールアドレス\r\n山田,a@example.com\r\n' });
    const failed = await jobIn(clientId, noNumbers.body.jobId, ['failed']);
    expect(failed.failureReason).toMatch(/no mobile number column .*お名前, メールアドレス/);

    // A placeholder no column of the list holds fails the job at the header, naming it.
    const unknown = await call('POST', `/clients/${clientId}/jobs`, {
      name: 'y',
      channel: 'sms',
      sms: { body: '{{お名前}}様、クーポン{{クーポン}}' },
    });
    const target = unknown.body.upload;
    await fetch(target.url, { method: target.method, body: 'お名前,携帯電話番号\r\n山田,090-1111-0001\r\n' });
    const refused = await jobIn(clientId, unknown.body.jobId, ['failed']);
    expect(refused.failureReason).toBe(
      "the job's content uses {{クーポン}}, which no column of the list holds (its columns: お名前, 携帯電話番号; the name column is {{name}})",
    );
  });

  it("links a row's phone and email into one person: a later email list's task to that address is the same person", async () => {
    const clientId = uniqueName('people');
    const email = { from: 'news@shop.example' };
    expect((await call('PUT', `/clients/${clientId}`, { ...CLIENT, email })).status).toBe(200);
    const upload = async (body: string, options: Record<string, unknown>) => {
      const created = await call('POST', `/clients/${clientId}/jobs`, options);
      expect(created.status).toBe(201);
      const target = created.body.upload;
      expect((await fetch(target.url, { method: target.method, body })).status).toBe(200);
      await jobIn(clientId, created.body.jobId, ['scheduled', 'running']);
      return tasksOf(created.body.jobId);
    };
    const calls = await upload(
      'お名前,電話番号,メールアドレス\r\n山田,090-1111-0001,Taro@Example.jp\r\n佐藤,090-1111-0002,\r\n',
      { name: 'calls', scenarioId: 'renewal' },
    );
    const [yamada, sato] = calls;
    expect(yamada!.person).toMatch(/^P[0-9A-Z]{26}$/);
    // A row with one identifier is a person of its own: no key beside the recipient.
    expect(sato!.person).toBeUndefined();
    const emails = await upload('メールアドレス\r\ntaro@example.jp\r\n', {
      name: 'mails',
      channel: 'email',
      email: { subject: 'hi', text: 'hello' },
    });
    expect(emails.map((t) => [t.recipient, t.person])).toEqual([['taro@example.jp', yamada!.person]]);

    // The person's history, looked up by either identifier: the email job first (newer), then the call.
    const history = async (identifier: string) =>
      (await call('GET', `/clients/${clientId}/people/${encodeURIComponent(identifier)}/history`)).body;
    const byPhone = await history('090-1111-0001');
    expect(byPhone).toMatchObject({ person: yamada!.person, more: false });
    expect(
      byPhone.history.map((e: Record<string, unknown>) => [e.jobName, e.channel, e.recipient, e.state]),
    ).toEqual([
      ['mails', 'email', 'taro@example.jp', 'pending'],
      ['calls', 'call', '+819011110001', 'pending'],
    ]);
    expect(await history('TARO@example.jp')).toEqual(byPhone);
    const alone = await history('090-1111-0002');
    expect(alone.history.map((e: Record<string, unknown>) => [e.jobName, e.recipient])).toEqual([
      ['calls', '+819011110002'],
    ]);
    // Never seen: a person of its own with no history; a bad identifier is named.
    expect((await history('090-9999-0000')).history).toEqual([]);
    const bad = await call('GET', `/clients/${clientId}/people/nobody/history`);
    expect(bad.status).toBe(400);
  });

  it("a job over line → email → sms: each task carries the row's identifier for every channel, and opt-outs wait for the claim", async () => {
    const clientId = uniqueName('fallback');
    const settings = {
      ...CLIENT,
      messageChannelId: 'ch-fallback',
      email: { from: 'news@shop.example' },
      sms: { originationIdentity: '+815012345678', partsPerSecond: 10 },
    };
    expect((await call('PUT', `/clients/${clientId}`, settings)).status).toBe(200);
    const created = await call('POST', `/clients/${clientId}/jobs`, {
      name: 'notice',
      channel: ['line', 'email', 'sms'],
      message: '{{name}}様、お知らせです',
      email: { subject: 'お知らせ', text: '{{name}}様' },
      sms: { body: '{{name}}様、お知らせです' },
    });
    expect(created.status).toBe(201);
    const line = (i: number) => `U${String(i).padStart(32, 'a')}`;
    // Opted out of LINE: kept as a task (its claim moves it on), not skipped as a LINE job's row is.
    await new DynamoOptOutStore(cloud.doc, controlTable).record(clientId, line(2), true, Date.now());
    const list = [
      // A landline beside the mobile: SMS goes to the mobile.
      'お名前,userId,電話番号,メールアドレス,携帯電話番号',
      `山田,${line(1)},03-1234-0001,Taro@Example.jp,090-1111-0001`,
      `佐藤,${line(2)},,,090-1111-0002`,
      `鈴木,${line(3)},,,`,
    ].join('\r\n');
    const target = created.body.upload;
    expect((await fetch(target.url, { method: target.method, body: list })).status).toBe(200);
    const job = await jobIn(clientId, created.body.jobId, ['scheduled', 'running']);
    expect(job).toMatchObject({ channel: 'line', fallback: ['email', 'sms'] });
    expect(job.counts).toMatchObject({ rows: 3, rejected: 0, skipped: 0, tasks: 3 });
    const tasks = await tasksOf(created.body.jobId);
    expect(tasks.map((t) => [t.recipient, t.reach])).toEqual([
      [line(1), { line: line(1), email: 'taro@example.jp', sms: '+819011110001' }],
      [line(2), { line: line(2), sms: '+819011110002' }],
      [line(3), { line: line(3) }],
    ]);
    // A channel of the list the client cannot send is refused at creation, at its field.
    const noSms = uniqueName('fallback');
    await call('PUT', `/clients/${noSms}`, { ...CLIENT, email: { from: 'news@shop.example' } });
    const refused = await call('POST', `/clients/${noSms}/jobs`, {
      name: 'x',
      channel: ['email', 'sms'],
      email: { subject: 's', text: 't' },
      sms: { body: 'b' },
    });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toContain('SMS needs the client to have SMS settings');
  });

  it('links, looks up and unlinks identifiers through the people routes, naming a bad one at its field', async () => {
    const clientId = await newClient();
    const linked = await call('POST', `/clients/${clientId}/people`, {
      identifiers: ['090-3333-0001', 'Hanako@Example.jp', `U${'b'.repeat(32)}`],
    });
    expect(linked.status).toBe(200);
    expect(linked.body.person).toMatch(/^P[0-9A-Z]{26}$/);
    expect(linked.body.identifiers).toEqual([
      { identifier: '+819033330001', kind: 'phone' },
      { identifier: 'hanako@example.jp', kind: 'email' },
      { identifier: `U${'b'.repeat(32)}`, kind: 'line' },
    ]);
    const found = await call('GET', `/clients/${clientId}/people/${encodeURIComponent('hanako@example.jp')}`);
    expect(found.body).toEqual(linked.body);
    const out = await call('DELETE', `/clients/${clientId}/people/${encodeURIComponent('+819033330001')}`);
    expect(out.body).toEqual({ identifier: '+819033330001', unlinked: true });
    const alone = await call('GET', `/clients/${clientId}/people/090-3333-0001`);
    expect(alone.body).toEqual({
      person: '+819033330001',
      identifiers: [{ identifier: '+819033330001', kind: 'phone' }],
    });
    const bad = await call('POST', `/clients/${clientId}/people`, {
      identifiers: ['090-3333-0001', 'nobody'],
    });
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body.fieldErrors)).toEqual(['identifiers[1]']);
    const one = await call('POST', `/clients/${clientId}/people`, { identifiers: ['090-3333-0001'] });
    expect(one.status).toBe(400);

    // A CSV of people: each row's identifier columns one person; a repeated phone brings its LINE id along.
    const line = `U${'c'.repeat(32)}`;
    const csv = [
      '電話番号,メールアドレス,LINEユーザーID,お名前',
      '090-4444-0001,ichiro@example.jp,,一郎',
      '090-4444-0001,,' + line + ',一郎',
      '090-4444-0002,,,次郎',
      '090-4444-0003,not-an-address,,三郎',
      'abc,jiro@example.jp,,x',
    ].join('\r\n');
    const uploaded = await call('POST', `/clients/${clientId}/people`, csv, { 'content-type': 'text/csv' });
    expect(uploaded.status).toBe(200);
    expect(uploaded.body).toMatchObject({ dataRows: 5, linked: 2, rejected: 1 });
    expect(uploaded.body.problems.map((p: { row: number; code: string }) => [p.row, p.code])).toEqual([
      [6, 'invalid-phone'],
    ]);
    const ichiro = await call('GET', `/clients/${clientId}/people/${line}`);
    expect(ichiro.body.identifiers.map((i: { identifier: string }) => i.identifier).sort()).toEqual(
      ['+819044440001', 'ichiro@example.jp', line].sort(),
    );
  });

  it('makes no second job, and no second task, from a duplicated S3 notification', async () => {
    const clientId = await newClient();
    const inline = await call('POST', `/clients/${clientId}/jobs?name=inline`, mixedList, {
      'content-type': 'text/csv',
    });
    expect(inline.status).toBe(201);
    const { jobId } = inline.body;
    const first = await jobIn(clientId, jobId, ['scheduled']);
    const before = harness.jobs().ingest.stats().deleted;
    const duplicate = s3EventNotification({
      bucket,
      key: `uploads/${clientId}/${jobId}.csv`,
      eTag: 'whatever-etag',
      size: mixedList.length,
      lastModified: new Date(),
      region: cloud.info.region,
      sequencer: '00000000000000000A',
    });
    await cloud.sqs.send(
      new SendMessageCommand({
        QueueUrl: harness.ingestQueueUrl(),
        MessageBody: JSON.stringify(duplicate),
      }),
    );
    await eventually(
      async () => (harness.jobs().ingest.stats().deleted > before ? true : undefined),
      'the duplicate to be consumed',
    );
    const after = await call('GET', `/clients/${clientId}/jobs/${jobId}`);
    expect(after.body).toEqual(first);
    expect((await tasksOf(jobId)).length).toBe(5);
  });

  it('keeps the retries by outcome of a job, and names a bad one at its field', async () => {
    const clientId = await newClient();
    const retries = {
      busy: { maxAttempts: 4, delay: { kind: 'exponential', seconds: 300, factor: 2, maxSeconds: 3600 } },
      'no-answer': { maxAttempts: 3, delay: { kind: 'list', seconds: [1800, 3600] } },
      failed: { maxAttempts: 1 },
    };
    const { jobId } = (await call('POST', `/clients/${clientId}/jobs`, { name: 'retries', retries })).body;
    expect((await call('GET', `/clients/${clientId}/jobs/${jobId}`)).body.retries).toEqual(retries);
    const bad = await call('POST', `/clients/${clientId}/jobs`, {
      name: 'bad retries',
      retries: { voicemail: { maxAttempts: 3 } },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.fieldErrors).toEqual({
      'retries.voicemail.delay': ['a delay schedule is needed when maxAttempts is over 1'],
    });
  });

  it('refuses an illegal transition with 409 and the current status', async () => {
    const clientId = await newClient();
    const { jobId } = (await call('POST', `/clients/${clientId}/jobs`, { name: 'never uploaded' })).body;
    expect(await call('POST', `/clients/${clientId}/jobs/${jobId}/resume`)).toEqual({
      status: 409,
      body: { message: 'cannot resume a job that is uploading', status: 'uploading' },
    });
    expect((await call('POST', `/clients/${clientId}/jobs/${jobId}/cancel`)).body.status).toBe('cancelled');
    expect((await call('POST', `/clients/${clientId}/jobs/${jobId}/pause`)).status).toBe(409);
    expect(
      (await call('GET', `/clients/${clientId}/jobs`)).body.jobs.map((j: { jobId: string }) => j.jobId),
    ).toEqual([jobId]);
  });

  it('pauses and resumes a whole client; a PUT of its settings keeps the pause and removes what it leaves out', async () => {
    const clientId = await newClient();
    expect((await call('POST', `/clients/${uniqueName('nobody')}/pause`)).status).toBe(404);
    const paused = await call('POST', `/clients/${clientId}/pause`);
    expect(paused.status).toBe(200);
    expect(paused.body.paused).toBe(true);
    // Twice is not an error.
    expect((await call('POST', `/clients/${clientId}/pause`)).body.paused).toBe(true);
    const put = await call('PUT', `/clients/${clientId}`, { ...CLIENT, messageChannelId: 'ch-1' });
    expect(put.body.paused).toBe(true);
    expect(put.body.messageChannelId).toBe('ch-1');
    const again = await call('PUT', `/clients/${clientId}`, CLIENT);
    expect(again.body.messageChannelId).toBeUndefined();
    expect((await call('GET', `/clients/${clientId}`)).body).toMatchObject({ paused: true });
    expect((await call('POST', `/clients/${clientId}/resume`)).body.paused).toBe(false);
    expect(
      (await call('PUT', `/clients/${clientId}`, { ...CLIENT, paused: 'yes' })).body.fieldErrors,
    ).toEqual({
      paused: [expect.any(String)],
    });
  });

  it('answers 403 without a SigV4 signature, as the IAM authoriser would', async () => {
    const response = await fetch(`${harness.api().url}/clients/anyone`, { method: 'GET' });
    expect(response.status).toBe(403);
  });
});

describe('a list dropped in incoming/', () => {
  it('creates one job with the sidecar options, even when S3 notifies twice', async () => {
    const clientId = await newClient();
    const base = `incoming/${clientId}/march list`;
    await cloud.s3.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: `${base}.json`,
        Body: JSON.stringify({ name: 'Dropped March', maxAttempts: 2 }),
      }),
    );
    const put = await cloud.s3.send(
      new PutObjectCommand({ Bucket: bucket, Key: `${base}.csv`, Body: mixedList }),
    );
    const listed = await eventually(async () => {
      const page = await call('GET', `/clients/${clientId}/jobs`);
      return page.body.jobs.length === 1 && page.body.jobs[0].status === 'scheduled'
        ? page.body.jobs
        : undefined;
    }, 'the dropped list to be scheduled');
    expect(listed[0]).toMatchObject({
      name: 'Dropped March',
      maxAttempts: 2,
      source: { bucket, key: `${base}.csv` },
    });
    expect(listed[0].counts).toMatchObject({ rows: 9, tasks: 5, rejected: 3, skipped: 1 });

    // The same event again (S3 delivers at least once): same object version, same event time.
    const head = await cloud.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: `${base}.csv` }));
    const event = s3EventNotification({
      bucket,
      key: `${base}.csv`,
      eTag: put.ETag!,
      size: mixedList.length,
      lastModified: head.LastModified!,
      region: cloud.info.region,
      sequencer: '00000000000000000B',
    });
    const before = harness.jobs().ingest.stats().deleted;
    await cloud.sqs.send(
      new SendMessageCommand({ QueueUrl: harness.ingestQueueUrl(), MessageBody: JSON.stringify(event) }),
    );
    await eventually(
      async () => (harness.jobs().ingest.stats().deleted > before ? true : undefined),
      'the duplicate to be consumed',
    );
    expect((await call('GET', `/clients/${clientId}/jobs`)).body.jobs).toHaveLength(1);
  });
});

describe('the ingest across runs, on DynamoDB and S3', () => {
  it('writes the same tasks and report when paused after every page as in one pass', async () => {
    const clientId = await newClient();
    const rows = ['電話番号,氏名,プラン'];
    for (let i = 0; i < 120; i++) {
      const n = i % 7 === 6 ? i - 3 : i; // a duplicate now and then
      rows.push(
        i % 11 === 10 ? `bad-${i},名前${i},A` : `090-2222-${String(n).padStart(4, '0')},名前${i},${i % 3}`,
      );
    }
    const csv = Buffer.from(`\ufeff${rows.join('\r\n')}\r\n`, 'utf8');
    const clients = new DynamoClientStore(cloud.doc, controlTable);
    const store = new DynamoJobStore(cloud.doc, controlTable);
    const tasks = new DynamoTaskStore(cloud.doc, tasksTable);
    const files = new S3UploadFiles(cloud.s3, bucket);
    const validationReports = new S3ValidationReportStore(cloud.s3, bucket);
    const clock = { now: () => Date.now() };
    const jobsApi = new JobsApi({
      region: 'ap-northeast-1',
      clients,
      jobs: store,
      tasks,
      files,
      validationReports,
      queue: { send: async () => {} },
      bucket,
      clock,
    });

    async function ingestOnce(maxRowsPerRun?: number) {
      const sent: ContinueIngestMessage[] = [];
      const ingest = new JobIngest({
        clients,
        jobs: store,
        tasks,
        files,
        validationReports,
        queue: {
          send: async (m) => {
            if (m.kind === 'continue') sent.push(m);
          },
        },
        clock,
        log: silentLogger,
        batchSize: 10,
        ...(maxRowsPerRun ? { maxRowsPerRun } : {}),
      });
      // Outside uploads/ and incoming/, so the notifier leaves this file to this test's runs.
      const jobId = newUlid();
      const key = `manual/${clientId}/${jobId}.csv`;
      const uploaded = await cloud.s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: csv }));
      const now = Date.now();
      await store.create({
        clientId,
        jobId,
        name: `run ${maxRowsPerRun ?? 'once'}`,
        channel: 'call',
        scenarioId: 'default',
        startAt: now,
        maxAttempts: 3,
        retryDelaySeconds: 60,
        status: 'uploading',
        counts: ZERO_COUNTS,
        source: { bucket, key },
        createdAt: now,
        updatedAt: now,
      });
      expect(
        await store.beginValidation(
          clientId,
          jobId,
          { eTag: uploaded.ETag!.replaceAll('"', ''), size: csv.length },
          now,
        ),
      ).toBe(true);
      const ctx = { remainingMs: () => 600_000, receiveCount: 1 };
      const kinds = [
        (await ingest.handle({ kind: 'continue', clientId, jobId, step: 0 } satisfies IngestMessage, ctx))
          .kind,
      ];
      while (sent.length > 0) kinds.push((await ingest.handle(sent.shift()!, ctx)).kind);
      return { jobId, kinds };
    }

    const once = await ingestOnce();
    const paused = await ingestOnce(10);
    expect(once.kinds).toEqual(['scheduled']);
    // 120 rows, 10 a run: 11 pauses, then the run that reaches the end.
    expect(paused.kinds).toEqual([...Array(11).fill('paused'), 'scheduled']);
    const view = async (jobId: string) => {
      const job = await jobsApi.getJob(clientId, jobId);
      const report = await jobsApi.report(clientId, jobId);
      if (report.kind !== 'inline') throw new Error('expected an inline report');
      const lines = report.csv.toString('utf8').split('\r\n').slice(1).sort();
      return {
        counts: job.counts,
        status: job.status,
        lines,
        tasks: (await tasksOf(jobId)).map((t) => [t.row, t.recipient, t.name]),
      };
    };
    const a = await view(once.jobId);
    const b = await view(paused.jobId);
    expect(b).toEqual(a);
    expect(a.counts).toMatchObject({ rows: 120, rejected: 10 });
    expect(a.counts.tasks + a.counts.skipped + a.counts.rejected).toBe(120);
  });
});
