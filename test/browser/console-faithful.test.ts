/**
 * The console shows what the API holds and changes only what the operator changed (issue 36's
 * defects, each test failing without its fix): a client with every setting set, opened and saved
 * unchanged, reads back identical (its calling hours were shown empty and saved closed); a call
 * job's form shows no message box; a cancelled job's counts keep moving until its tasks have ended;
 * the focus never falls to the page's body; a do-not-call number is not "may be contacted"; at a
 * phone's width no table is cut off; the focus ring and breadcrumbs meet WCAG's contrast; the
 * chart starts at 0, counts calls in whole numbers, gives each series its own colour, shows no
 * series that is not drawn, and has a text alternative. A viewer is offered nothing to change, an
 * operator jobs but not settings (the API refuses the rest: test/e2e/authorization-matrix.test.ts).
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { HTTPRequest } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_CONSOLE_USERS } from '#local/stack.ts';
import { ConsoleBrowser, type PageElement, SCREENSHOTS } from '../support/console-browser.ts';
import { until } from '../support/wait.ts';

declare const document: {
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): PageElement[];
  documentElement: PageElement;
};
declare const window: { innerWidth: number; getComputedStyle(e: PageElement): Record<string, string> };
declare const sessionStorage: {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
};

const ADMIN = LOCAL_CONSOLE_USERS[0]!;
const user = (name: string) => LOCAL_CONSOLE_USERS.find((u) => u.username === name)!;
const DEMO = 'demo-client';
/** Where the console keeps this tab's tokens (`console/src/auth.ts`). */
const SESSION_KEY = 'switchboard.tokens';
const CLIENT = `faithful-${process.pid}`;
const OPEN_ALWAYS = Object.fromEntries(
  ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]),
);

let ui: ConsoleBrowser;
let work: string;

beforeAll(async () => {
  work = mkdtempSync(path.join(os.tmpdir(), 'switchboard-faithful-'));
  ui = await ConsoleBrowser.start({ stage: 'faithful', fleet: true, telephonyTimeScale: 60 });
  const put = await ui.stack.operator('PUT', `/clients/${CLIENT}`, {
    json: {
      maxConcurrentCalls: 2,
      callsPerSecond: 1,
      timeZone: 'Asia/Tokyo',
      callingHours: OPEN_ALWAYS,
      defaultRegion: 'JP',
    },
  });
  expect(put.status, put.body).toBe(200);
  await ui.signIn(ADMIN.username, ADMIN.password);
}, 180_000);

afterAll(async () => {
  await ui?.stop();
});

type Json = Record<string, unknown>;

async function client(clientId: string): Promise<Json> {
  const answer = await ui.stack.operator('GET', `/clients/${clientId}`);
  expect(answer.status, answer.body).toBe(200);
  const { updatedAt: _, ...settings } = answer.json<Json>();
  return settings;
}

/** Creates a job of `rows` numbers through the API, starting in an hour; answers its id. */
async function scheduledJob(name: string, rows: number): Promise<string> {
  const created = await ui.stack.operator('POST', `/clients/${CLIENT}/jobs`, {
    json: {
      name,
      channel: 'call',
      scenarioId: 'default',
      startAt: new Date(Date.now() + 3_600_000).toISOString(),
    },
  });
  expect(created.status, created.body).toBe(201);
  const { jobId, upload } = created.json<{ jobId: string; upload: { url: string } }>();
  const csv = ['phone', ...Array.from({ length: rows }, (_, i) => `090-3333-${String(i).padStart(4, '0')}`)];
  const put = await fetch(upload.url, { method: 'PUT', body: csv.join('\n') });
  expect(put.status).toBe(200);
  return jobId;
}

describe('the console is faithful to the API', () => {
  it('shows an existing client’s calling hours, and Save unchanged keeps every setting as it was', async () => {
    const full = `${CLIENT}-full`;
    const put = await ui.stack.operator('PUT', `/clients/${full}`, {
      json: {
        maxConcurrentCalls: 7,
        callsPerSecond: 1.5,
        timeZone: 'Asia/Tokyo',
        callingHours: {
          mon: [
            { start: '09:00', end: '12:00' },
            { start: '13:00', end: '18:00' },
          ],
          tue: [{ start: '09:30', end: '17:45' }],
          fri: [{ start: '22:00', end: '02:00' }],
          sat: [{ start: '10:00', end: '24:00' }],
        },
        defaultRegion: 'JP',
        messageChannelId: `${full}-line`,
        jobDefaults: {
          channel: 'call',
          scenarioId: 'reminder',
          maxAttempts: 3,
          retryDelaySeconds: 900,
          restrictedPeriods: [{ start: '2026-05-03', end: '2026-05-05', name: 'golden week' }],
          holidays: { country: 'JP' },
          retries: {
            busy: { maxAttempts: 3, delay: { kind: 'list', seconds: [1800, 3600] } },
            'no-answer': { maxAttempts: 2, delay: { kind: 'exponential', seconds: 60, factor: 2 } },
            voicemail: { maxAttempts: 2, delay: { kind: 'fixed', seconds: 90 } },
            failed: { maxAttempts: 1 },
          },
        },
        telephony: { provider: 'http', baseUrl: 'http://127.0.0.1:9/' },
        email: { from: 'news@example.com', fromName: 'ショップ', delivery: 'at-least-once' },
        sms: { originationIdentity: '+815012345678', partsPerSecond: 10, messageType: 'PROMOTIONAL' },
        outcomeWebhook: { url: 'http://127.0.0.1:9/outcomes', secret: 'outcome-secret-0123456789' },
        restrictedPeriods: [
          { start: '2026-12-29', end: '2027-01-03', name: 'year-end' },
          { start: '2026-11-20T12:00', end: '2026-11-20T13:00' },
        ],
        holidays: { country: 'JP' },
        contactLimits: [
          { max: 1, per: 'day', channels: ['call', 'line', 'sms'] },
          { max: 3, per: { days: 7 }, channels: ['call'] },
        ],
        allowPartialDelivery: true,
      },
    });
    expect(put.status, put.body).toBe(200);
    const before = await client(full);
    await ui.open(`#/clients/${full}`);
    await ui.page.waitForSelector('form[aria-label="Client settings"]');
    const windows = await ui.page.$$eval('.day', (days) =>
      days.map((day) =>
        [...day.querySelectorAll('.window input')].map((input) => (input as unknown as PageElement).value),
      ),
    );
    expect(windows).toEqual([
      ['09:00', '12:00', '13:00', '18:00'],
      ['09:30', '17:45'],
      [],
      [],
      ['22:00', '02:00'],
      ['10:00', '24:00'],
      [],
    ]);
    await ui.page.click('form[aria-label="Client settings"] button[type=submit]');
    await ui.waitForText('form[aria-label="Client settings"] .form-errors', /^Saved\.$/);
    expect(await client(full)).toEqual(before);
  });

  it('edits the email and SMS sending settings: a refused one is named at its field, an emptied From removes email', async () => {
    const sender = `${CLIENT}-sender`;
    const base = {
      maxConcurrentCalls: 2,
      callsPerSecond: 1,
      timeZone: 'Asia/Tokyo',
      callingHours: OPEN_ALWAYS,
      defaultRegion: 'JP',
    };
    expect((await ui.stack.operator('PUT', `/clients/${sender}`, { json: base })).status).toBe(200);
    await ui.open(`#/clients/${sender}`);
    await ui.page.waitForSelector('form[aria-label="Client settings"]');
    const typeInto = async (selector: string, text: string) => {
      await ui.page.evaluate((s) => {
        (document.querySelector(s) as unknown as { value: string }).value = '';
      }, selector);
      await ui.page.type(selector, text);
    };
    const save = async (expected: RegExp) => {
      await ui.page.click('form[aria-label="Client settings"] button[type=submit]');
      await ui.waitForText('form[aria-label="Client settings"] .form-errors', expected);
    };
    await typeInto('#f-sms-originationIdentity', '050-1234-5678');
    await ui.page.click('form[aria-label="Client settings"] button[type=submit]');
    await ui.waitForText(
      '[data-field="sms.originationIdentity"] .field-error',
      /must be a phone number in E\.164/,
    );
    expect((await client(sender)).sms).toBeUndefined();

    await typeInto('#f-sms-originationIdentity', '+815012345678');
    await typeInto('#f-sms-partsPerSecond', '20');
    await ui.page.select('#f-sms-messageType', 'PROMOTIONAL');
    await typeInto('#f-email-from', 'news@example.com');
    await typeInto('#f-email-fromName', 'ショップ');
    await typeInto('#f-email-replyTo', 'help@example.com, sales@example.com');
    await save(/^Saved\.$/);
    const saved = await client(sender);
    expect(saved.sms).toEqual({
      originationIdentity: '+815012345678',
      partsPerSecond: 20,
      messageType: 'PROMOTIONAL',
    });
    expect(saved.email).toEqual({
      from: 'news@example.com',
      fromName: 'ショップ',
      replyTo: ['help@example.com', 'sales@example.com'],
    });

    // Reopened, the fields show what was saved; an emptied From removes the client's email, SMS stays.
    await ui.page.reload();
    await ui.page.waitForSelector('form[aria-label="Client settings"]');
    expect(await ui.page.$eval('#f-email-replyTo', (e) => (e as unknown as PageElement).value)).toBe(
      'help@example.com, sales@example.com',
    );
    await typeInto('#f-email-from', ' ');
    await save(/^Saved\.$/);
    const after = await client(sender);
    expect(after.email).toBeUndefined();
    expect(after.sms).toEqual(saved.sms);
  });

  it('shows no message box on a call job’s form, no scenario on a LINE one, the email’s fields only on an email one, the text only on an SMS one', async () => {
    await ui.open(`#/clients/${CLIENT}/jobs/new`);
    await ui.page.waitForSelector('form[aria-label="New job"]');
    const shown = (selector: string) =>
      ui.page.$eval(selector, (e) => (e as unknown as PageElement).offsetParent !== null);
    expect(await shown('#f-message')).toBe(false);
    expect(await shown('#f-scenarioId')).toBe(true);
    await ui.page.select('#f-channel', 'line');
    expect(await shown('#f-message')).toBe(true);
    expect(await shown('#f-scenarioId')).toBe(false);
    expect(await shown('#f-email')).toBe(false);
    await ui.page.select('#f-channel', 'email');
    expect(await shown('#f-email')).toBe(true);
    expect(await shown('#f-message')).toBe(false);
    expect(await shown('#f-sms')).toBe(false);
    await ui.page.select('#f-channel', 'sms');
    expect(await shown('#f-sms')).toBe(true);
    expect(await shown('#f-email')).toBe(false);
    expect(await shown('#f-scenarioId')).toBe(false);
  });

  it('creates a job that falls back line → email → sms: each channel’s content shown, a channel not picked twice', async () => {
    const falls = `${CLIENT}-falls`;
    const settings = {
      maxConcurrentCalls: 2,
      callsPerSecond: 1,
      timeZone: 'Asia/Tokyo',
      callingHours: OPEN_ALWAYS,
      defaultRegion: 'JP',
      messageChannelId: `${falls}-line`,
      email: { from: 'news@example.com' },
      sms: { originationIdentity: '+815012345678' },
    };
    expect((await ui.stack.operator('PUT', `/clients/${falls}`, { json: settings })).status).toBe(200);
    await ui.open(`#/clients/${falls}/jobs/new`);
    await ui.page.waitForSelector('form[aria-label="New job"]');
    const shown = (selector: string) =>
      ui.page.$eval(selector, (e) => (e as unknown as PageElement).offsetParent !== null);
    expect(await shown('#f-fallback-1')).toBe(false);
    await ui.page.select('#f-channel', 'line');
    expect(await shown('#f-fallback-1')).toBe(true);
    expect(await shown('#f-fallback-2')).toBe(false);
    // LINE is the job's channel: it cannot be its own fallback.
    const disabled = (selector: string) =>
      ui.page.$$eval(`${selector} option`, (options) =>
        options
          .filter((o) => (o as unknown as { disabled: boolean }).disabled)
          .map((o) => o.getAttribute('value')),
      );
    expect(await disabled('#f-fallback-1')).toEqual(['line']);
    await ui.page.select('#f-fallback-1', 'email');
    expect(await shown('#f-fallback-2')).toBe(true);
    expect(await disabled('#f-fallback-2')).toEqual(['line', 'email']);
    expect([await shown('#f-message'), await shown('#f-email'), await shown('#f-sms')]).toEqual([
      true,
      true,
      false,
    ]);
    await ui.page.select('#f-fallback-2', 'sms');
    expect([await shown('#f-message'), await shown('#f-email'), await shown('#f-sms')]).toEqual([
      true,
      true,
      true,
    ]);
    expect(await shown('#f-scenarioId')).toBe(false);

    await ui.page.type('#f-name', 'お知らせ');
    await ui.page.type('#f-message', '{{名前}}様、お知らせです');
    await ui.page.type('#f-email', 'お知らせ');
    await ui.page.type('#f-email-text', '{{名前}}様');
    await ui.page.type('#f-sms', '{{名前}}様、お知らせです');
    // Tomorrow: the job waits, and sends nothing here.
    await ui.page.$eval('#f-startAt', (e) => {
      const at = new Date(Date.now() + 86_400_000 - new Date().getTimezoneOffset() * 60_000);
      (e as unknown as { value: string }).value = at.toISOString().slice(0, 16);
    });
    const csv = path.join(work, 'fallback.csv');
    writeFileSync(
      csv,
      [
        'userId,メールアドレス,携帯電話番号,名前',
        `U${'1'.repeat(32)},taro@example.jp,090-1234-0001,山田`,
        `U${'2'.repeat(32)},,090-1234-0002,佐藤`,
      ].join('\r\n'),
    );
    const input = await ui.page.$('#f-file');
    await (input as unknown as { uploadFile(p: string): Promise<void> }).uploadFile(csv);
    await ui.page.$eval('#f-file', (e) => e.dispatchEvent(new Event('change')));
    await ui.page.click('form[aria-label="New job"] button[type=submit]');
    await ui.waitForText('[data-count="tasks"]', /^2$/);
    const { jobs } = (await ui.stack.operator('GET', `/clients/${falls}/jobs`)).json<{
      jobs: { name: string; channel: string; fallback?: string[]; status: string }[];
    }>();
    expect(jobs.map(({ name, channel, fallback, status }) => ({ name, channel, fallback, status }))).toEqual([
      { name: 'お知らせ', channel: 'line', fallback: ['email', 'sms'], status: 'scheduled' },
    ]);
  });

  it('puts the focus on the new page’s heading, and on the next action after Pause, never on the body', async () => {
    const jobId = await scheduledJob('focus', 3);
    await ui.open(`#/clients/${CLIENT}/jobs/${jobId}`);
    await ui.page.waitForSelector('[data-status="scheduled"]');
    expect((await ui.focused()).tag).toBe('H1');
    await ui.clickButton('Pause');
    await ui.page.waitForSelector('[data-status="paused"]');
    expect(await ui.focused()).toEqual({ tag: 'BUTTON', text: 'Resume' });
    await ui.clickButton('Resume');
    await ui.page.waitForSelector('[data-status="scheduled"]');
    expect(await ui.focused()).toEqual({ tag: 'BUTTON', text: 'Pause' });
  });

  it('keeps a cancelled job’s counts moving until every task has ended', async () => {
    const jobId = await scheduledJob('to cancel', 56);
    await ui.open(`#/clients/${CLIENT}/jobs/${jobId}`);
    await ui.page.waitForSelector('[data-status="scheduled"]');
    await ui.waitForText('[data-count="outstanding"]', /^56$/);
    await ui.clickButton('Cancel job');
    await ui.page.waitForSelector('[data-status="cancelled"]');
    await ui.waitForText('[data-count="cancelled"]', /^56$/);
    expect(await ui.text('[data-count="outstanding"]')).toBe('0');
  });

  it('says a number on the do-not-call list may not be contacted', async () => {
    const add = await ui.stack.operator('POST', `/clients/${CLIENT}/suppressions`, {
      json: { recipients: ['090-4444-0001'], reason: 'asked on the phone' },
    });
    expect(add.status, add.body).toBe(200);
    await ui.open(`#/clients/${CLIENT}/opt-outs`);
    await ui.page.waitForSelector('#f-recipient');
    await ui.page.type('#f-recipient', '090-4444-0001, 090-4444-0002');
    await ui.page.click('main form button[type=submit]');
    await ui.waitForText('table.opt-outs tbody', /do-not-call/);
    const states = await ui.page.$$eval('table.opt-outs tbody tr', (rows) =>
      rows.map((r) => [...r.querySelectorAll('td')].slice(0, 2).map((td) => td.textContent)),
    );
    expect(states).toEqual([
      ['090-4444-0001 → +819044440001', 'on the do-not-call list (asked on the phone)'],
      ['090-4444-0002 → +819044440002', 'may be contacted'],
    ]);
  });

  it('cuts off no table at a phone’s width: the page never scrolls sideways, a wide table does in its box', async () => {
    await ui.page.setViewport({ width: 390, height: 844 });
    try {
      for (const [hash, table] of [
        [`#/clients/${CLIENT}`, 'table.jobs'],
        [`#/clients/${CLIENT}/opt-outs`, 'table.opt-outs'],
      ] as const) {
        await ui.open(hash);
        if (table === 'table.opt-outs') {
          await ui.page.waitForSelector('#f-recipient');
          await ui.page.type('#f-recipient', '090-4444-0001');
          await ui.page.click('main form button[type=submit]');
        }
        await ui.page.waitForSelector(`${table} tbody tr`);
        const fit = await ui.page.$eval(table, (t) => {
          const box = t.closest('.table-scroll');
          const right = t.getBoundingClientRect().right;
          return {
            pageOverflows: document.documentElement.scrollWidth > window.innerWidth,
            // The table ends inside the screen, or its box scrolls to show the rest.
            reachable: right <= window.innerWidth || (box !== null && box.scrollWidth > box.clientWidth),
          };
        });
        expect(fit, hash).toEqual({ pageOverflows: false, reachable: true });
        await ui.page.screenshot({
          path: path.join(SCREENSHOTS, `narrow-${table.replace('table.', '')}.png`),
          fullPage: true,
        });
      }
    } finally {
      await ui.page.setViewport({ width: 1280, height: 900 });
    }
  });

  it('draws the focus ring and the breadcrumbs at WCAG contrast (3:1 and 4.5:1)', async () => {
    await ui.open(`#/clients/${CLIENT}`);
    await ui.page.waitForSelector('.crumbs a');
    const colours = await ui.page.evaluate(() => {
      const crumbs = document.querySelector('.crumbs')!;
      const main = document.querySelector('main')!;
      const card = document.querySelector('.card')!;
      return {
        crumbs: window.getComputedStyle(crumbs).color!,
        crumbLink: window.getComputedStyle(document.querySelector('.crumbs a')!).color!,
        page: window.getComputedStyle(main).backgroundColor!,
        body: window.getComputedStyle(document.documentElement).backgroundColor!,
        card: window.getComputedStyle(card).backgroundColor!,
      };
    });
    // Focused by the keyboard, so that :focus-visible draws the ring.
    expect(await ui.tabTo('Save settings')).toBe(true);
    const ring = await ui.page.$eval(
      'form[aria-label="Client settings"] button[type=submit]',
      (b) => window.getComputedStyle(b).outlineColor!,
    );
    const pageGrey = colours.page === 'rgba(0, 0, 0, 0)' ? colours.body : colours.page;
    expect(contrast(colours.crumbs, pageGrey)).toBeGreaterThanOrEqual(4.5);
    expect(contrast(colours.crumbLink, pageGrey)).toBeGreaterThanOrEqual(4.5);
    expect(contrast(ring, colours.card)).toBeGreaterThanOrEqual(3);
    expect(contrast(ring, pageGrey)).toBeGreaterThanOrEqual(3);
  });

  it('draws a chart that starts at 0, counts calls whole, colours each series apart, and reads as a table', async () => {
    const csv = path.join(work, 'chart.csv');
    writeFileSync(
      csv,
      ['phone', ...Array.from({ length: 12 }, (_, i) => `090-5555-${String(i).padStart(4, '0')}`)].join('\n'),
    );
    await ui.open(`#/clients/${CLIENT}/jobs/new`);
    await ui.page.waitForSelector('form[aria-label="New job"]');
    await ui.page.type('#f-name', 'chart');
    await ui.setInput('#f-maxAttempts', '1');
    await ui.chooseFile(csv);
    await ui.page.click('form[aria-label="New job"] button[type=submit]');
    await ui.page.waitForSelector('.result a.button', { timeout: 60_000 });
    await ui.page.click('.result a.button');
    await ui.page.waitForSelector('.chart .uplot', { timeout: 120_000 });
    await ui.page.waitForFunction(
      () => /latest window/.test(document.querySelector('.chart')?.getAttribute('aria-label') ?? ''),
      { timeout: 120_000, polling: 200 },
    );
    await ui.page.waitForSelector('.chart[data-left-ticks]');
    const chart = await ui.page.$eval('.chart', (box) => ({
      label: box.getAttribute('aria-label') ?? '',
      role: box.getAttribute('role'),
      ticks: (box.getAttribute('data-left-ticks') ?? '').split(' ').map(Number),
      legend: [...box.querySelectorAll('.u-legend .u-series')].map((row) => row.textContent ?? ''),
      markers: [...box.querySelectorAll('.u-legend .u-series .u-marker')].map(
        (m) => window.getComputedStyle(m).borderColor ?? '',
      ),
    }));
    expect(chart.role).toBe('img');
    expect(chart.label).toMatch(/^Chart over time; latest window: calls in flight \d+, limit 2, starts\/s/);
    expect(chart.ticks[0]).toBe(0);
    expect(chart.ticks.every(Number.isInteger)).toBe(true);
    // The four series drawn, no hidden one, and no "--" for a value under no cursor.
    expect(chart.legend.map((l) => l.trim())).toEqual(['calls in flight', 'limit', 'starts/s', 'line rate']);
    expect(new Set(chart.markers).size).toBe(4);
    const table = await ui.page.$$eval('table.series-table thead th', (th) => th.map((t) => t.textContent));
    expect(table).toEqual(['Window ending', 'calls in flight', 'limit', 'starts/s', 'line rate']);
    expect(await ui.page.$$eval('table.series-table tbody tr', (rows) => rows.length)).toBeGreaterThan(0);
  });
});

describe('a job’s settings', () => {
  it('reach the API as entered: start, end, attempts, delay, its own hours, each recipient’s zone', async () => {
    const csv = path.join(work, 'settings.csv');
    writeFileSync(csv, ['phone', '090-7100-0001'].join('\n'));
    await ui.open(`#/clients/${CLIENT}/jobs/new`);
    await ui.page.waitForSelector('form[aria-label="New job"]');
    expect(await ui.unlabelledInputs()).toEqual([]);
    const start = localInAnHour();
    const end = localIn(3 * 3_600_000);
    await ui.page.type('#f-name', 'every setting');
    await ui.setInput('#f-scenarioId', 'reminder');
    await ui.setInput('#f-startAt', start);
    await ui.setInput('#f-endAt', end);
    await ui.setInput('#f-maxAttempts', '2');
    await ui.setInput('#f-retryDelaySeconds', '900');
    await ui.page.click('#f-timeZoneBy');
    await ui.page.click('#f-callingHours-own');
    await ui.page.click('.schedule button[aria-label="Add a Saturday window"]');
    await ui.setInput('.schedule input[aria-label="Saturday from"]', '10:00');
    await ui.setInput('.schedule input[aria-label="Saturday until"]', '12:30');
    await ui.chooseFile(csv);
    await ui.page.click('form[aria-label="New job"] button[type=submit]');
    await ui.page.waitForSelector('.result a.button', { timeout: 60_000 });
    const href = await ui.page.$eval('.result a.button', (a) => a.getAttribute('href') ?? '');
    const jobId = href.split('/').at(-1)!;
    const job = (await ui.stack.operator('GET', `/clients/${CLIENT}/jobs/${jobId}`)).json<
      Record<string, unknown>
    >();
    expect(job).toMatchObject({
      name: 'every setting',
      channel: 'call',
      scenarioId: 'reminder',
      maxAttempts: 2,
      retryDelaySeconds: 900,
      timeZoneBy: 'recipient',
    });
    expect(Date.parse(String(job.startAt))).toBe(Date.parse(new Date(start).toISOString()));
    expect(Date.parse(String(job.endAt))).toBe(Date.parse(new Date(end).toISOString()));
    const weekday = [{ start: '09:00', end: '18:00' }];
    expect((job.callingHours as { weekly: unknown }).weekly).toEqual({
      mon: weekday,
      tue: weekday,
      wed: weekday,
      thu: weekday,
      fri: weekday,
      sat: [{ start: '10:00', end: '12:30' }],
    });
  });
});

describe('uploading a list', () => {
  it('offers a template list that the ingest reads as it is: every row a task', async () => {
    const downloads = path.join(work, 'downloads');
    const cdp = await ui.page.createCDPSession();
    await cdp.send('Browser.setDownloadBehavior', {
      behavior: 'allow',
      downloadPath: downloads,
      eventsEnabled: true,
    });
    const completed = new Promise<string>((resolve) => {
      const names = new Map<string, string>();
      cdp.on('Browser.downloadWillBegin', (e) => names.set(e.guid, e.suggestedFilename));
      cdp.on('Browser.downloadProgress', (e) => {
        if (e.state === 'completed') resolve(names.get(e.guid) ?? '');
      });
    });
    await ui.open(`#/clients/${CLIENT}/jobs/new`);
    await ui.page.waitForSelector('a.template-link');
    await ui.page.click('a.template-link');
    const file = path.join(downloads, await completed);
    expect(readFileSync(file, 'utf8')).toMatch(/^\uFEFF電話番号,名前,メモ\r\n/);
    await ui.page.type('#f-name', 'from the template');
    await ui.setInput('#f-startAt', localInAnHour());
    await ui.chooseFile(file);
    await ui.page.click('form[aria-label="New job"] button[type=submit]');
    await ui.page.waitForSelector('.result [data-count="tasks"]', { timeout: 60_000 });
    expect(await ui.text('.result [data-count="tasks"]')).toBe('2');
    expect(await ui.text('.result [data-count="rejected"]')).toBe('0');
  });

  it('shows how far the reading of a large list has got, as the ingest records it', async () => {
    const csv = path.join(work, 'progress.csv');
    writeFileSync(csv, ['phone', '090-7000-0001', '090-7000-0002'].join('\n'));
    // The first reads of the job answer what the ingest of a large list records midway.
    let held = 0;
    const onRequest = (request: HTTPRequest) => {
      if (request.isInterceptResolutionHandled()) return;
      if (held < 3 && request.method() === 'GET' && /\/jobs\/[^/]+$/.test(new URL(request.url()).pathname)) {
        held++;
        const counts = {
          rows: 12_345,
          rejected: 3,
          skipped: 0,
          tasks: 12_342,
          completed: 0,
          failed: 0,
          cancelled: 0,
          outstanding: 12_342,
        };
        void request.respond({
          status: 200,
          contentType: 'application/json',
          body: JSON.stringify({
            clientId: CLIENT,
            jobId: 'x',
            name: 'big',
            channel: 'call',
            status: 'validating',
            counts,
          }),
        });
      } else void request.continue();
    };
    await ui.open(`#/clients/${CLIENT}/jobs/new`);
    await ui.page.waitForSelector('form[aria-label="New job"]');
    await ui.page.type('#f-name', 'progress');
    await ui.setInput('#f-startAt', localInAnHour());
    await ui.chooseFile(csv);
    await ui.page.setRequestInterception(true);
    ui.page.on('request', onRequest);
    try {
      await ui.page.click('form[aria-label="New job"] button[type=submit]');
      await ui.waitForText(
        'form[aria-label="New job"] .note',
        /12,345 rows read so far: 12,342 tasks, 3 rejected/,
      );
      await ui.page.waitForSelector('.result [data-count="tasks"]', { timeout: 60_000 });
      expect(await ui.text('.result [data-count="tasks"]')).toBe('2');
    } finally {
      ui.page.off('request', onRequest);
      await ui.page.setRequestInterception(false);
    }
  });
});

/** An hour from now as a `datetime-local` value (the browser's zone): the job waits, calling nobody. */
function localInAnHour(): string {
  return localIn(3_600_000);
}

/** `ms` from now as a `datetime-local` value, to the minute (this machine's zone is the browser's). */
function localIn(ms: number): string {
  const later = new Date(Date.now() + ms);
  return new Date(later.getTime() - later.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

describe('the do-not-call list', () => {
  it('lists who is on it, with where from and why; an operator adds, uploads and removes', async () => {
    await ui.open(`#/clients/${CLIENT}/suppressions`);
    await ui.page.waitForSelector('form[aria-label="Add to the list"]:not([hidden])');
    expect(await ui.unlabelledInputs()).toEqual([]);
    await ui.page.type('#f-recipients', '090-8000-0001\n090-8000-0002');
    await ui.page.type('#f-reason', '電話で希望');
    await ui.page.click('form[aria-label="Add to the list"] button[type=submit]');
    await ui.waitForText('form[aria-label="Add to the list"] .form-status', /^2 added\.$/);
    await ui.page.waitForSelector('tr[data-recipient="+819080000002"]');
    const row = await ui.page.$$eval('tr[data-recipient="+819080000001"] td', (td) =>
      td.slice(0, 3).map((t) => t.textContent),
    );
    expect(row).toEqual(['+819080000001', 'added by an operator', '電話で希望']);

    const csv = path.join(work, 'dnc.csv');
    writeFileSync(csv, ['電話番号,備考', '090-8000-0003,苦情', 'not a number,', '090-8000-0004,'].join('\n'));
    const input = await ui.page.$('form[aria-label="Upload a list"] input[type=file]');
    await (input as unknown as { uploadFile(p: string): Promise<void> }).uploadFile(csv);
    await ui.page.click('form[aria-label="Upload a list"] button[type=submit]');
    await ui.waitForText('[data-upload="counts"]', /^3 rows: 2 added, 1 rejected, 0 skipped\.$/);
    await ui.page.waitForSelector('tr[data-recipient="+819080000004"]');

    await ui.page.click('tr[data-recipient="+819080000001"] button');
    await ui.page.waitForFunction(
      () => document.querySelector('tr[data-recipient="+819080000001"]') === null,
    );
    const listed = (await ui.stack.operator('GET', `/clients/${CLIENT}/suppressions?limit=500`))
      .json<{
        suppressions: { recipient: string }[];
      }>()
      .suppressions.map((e) => e.recipient);
    expect(listed).not.toContain('+819080000001');
    expect(listed).toEqual(expect.arrayContaining(['+819080000002', '+819080000003', '+819080000004']));
  });
});

describe('people', () => {
  it('finds a customer by any identifier, shows which is on the do-not-call list; an operator unlinks and links', async () => {
    const line = `U${'e'.repeat(32)}`;
    const linked = await ui.stack.operator('POST', `/clients/${CLIENT}/people`, {
      json: { identifiers: ['090-8100-0001', 'taro@example.jp', line] },
    });
    expect(linked.status, linked.body).toBe(200);
    const added = await ui.stack.operator('POST', `/clients/${CLIENT}/suppressions`, {
      json: { recipients: ['taro@example.jp'], reason: 'メールで配信停止' },
    });
    expect(added.status, added.body).toBe(200);

    // A call job that rings the customer's phone, run to its end: the person's history shows it.
    const created = await ui.stack.operator('POST', `/clients/${CLIENT}/jobs`, {
      json: { name: '更新のご案内', channel: 'call', scenarioId: 'default', maxAttempts: 1 },
    });
    expect(created.status, created.body).toBe(201);
    const call = created.json<{ jobId: string; upload: { url: string } }>();
    expect(
      (await fetch(call.upload.url, { method: 'PUT', body: 'phone\n090-8100-0001\n090-8100-0002\n' })).status,
    ).toBe(200);
    // Both rows ended (not the job: the job manager's next pass ends it): read where the page reads.
    const seen: Record<string, unknown> = {};
    const ended = async (identifier: string) => {
      const answer = await ui.stack.operator('GET', `/clients/${CLIENT}/people/${identifier}/history`);
      const [entry] = answer.json<{ history: { state: string }[] }>().history;
      seen[identifier] = entry;
      return entry !== undefined && ['completed', 'failed', 'cancelled'].includes(entry.state);
    };
    await until(
      async () => (await ended('090-8100-0001')) && (await ended('090-8100-0002')),
      () => `both calls to end (last seen: ${JSON.stringify(seen)})`,
    );

    await ui.open(`#/clients/${CLIENT}/people`);
    await ui.page.waitForSelector('form[aria-label="Link identifiers"]:not([hidden])');
    expect(await ui.unlabelledInputs()).toEqual([]);
    await ui.page.type('#f-identifier', '090-8100-0001');
    await ui.page.click('form[role="search"] button[type=submit]');
    await ui.page.waitForSelector(`tr[data-identifier="${line}"]`);
    const rows = await ui.page.$$eval('section[aria-label="The person"] tbody tr[data-identifier]', (trs) =>
      trs.map((tr) => [...tr.querySelectorAll('td')].slice(0, 3).map((td) => td.textContent)),
    );
    expect(rows).toEqual([
      ['+819081000001', 'Phone', 'no'],
      ['taro@example.jp', 'Email', 'on the list (メールで配信停止)'],
      [line, 'LINE user ID', 'no'],
    ]);
    await ui.page.waitForSelector(`.history tr[data-job="${call.jobId}"]`);
    const history = await ui.page.$$eval('.history tbody tr', (trs) =>
      trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)),
    );
    // The address on the list keeps the person's phone from being rung: the history says so.
    expect(history.map((cells) => cells.slice(1))).toEqual([
      [
        '更新のご案内',
        'Call',
        '+819081000001',
        'cancelled · suppressed',
        '0',
        '',
        'suppressed: api (another identifier of the same person)',
      ],
    ]);
    expect(await ui.text('[data-history="summary"]')).toBe('1 contact, newest first.');
    // The other row of the job was rung: its result and the call's length.
    await ui.page.evaluate(() => {
      (document.querySelector('#f-identifier') as unknown as { value: string }).value = '';
    });
    await ui.page.type('#f-identifier', '090-8100-0002');
    await ui.page.click('form[role="search"] button[type=submit]');
    await ui.page.waitForSelector('tr[data-identifier="+819081000002"]');
    const rung = await ui.page.$$eval('.history tbody tr', (trs) =>
      trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)),
    );
    expect(rung).toHaveLength(1);
    const [, job, channel, to, outcome, attempts, length] = rung[0]!;
    expect([job, channel, to]).toEqual(['更新のご案内', 'Call', '+819081000002']);
    expect(Number(attempts)).toBeGreaterThan(0);
    expect(outcome).toMatch(/^(completed|failed)( · .+)?$/);
    expect(length).toMatch(/^\d+:\d\d$/);
    await ui.page.evaluate(() => {
      (document.querySelector('#f-identifier') as unknown as { value: string }).value = '';
    });
    await ui.page.type('#f-identifier', '090-8100-0001');
    await ui.page.click('form[role="search"] button[type=submit]');
    await ui.page.waitForSelector(`tr[data-identifier="${line}"]`);

    await ui.page.click(`tr[data-identifier="${line}"] button`);
    await ui.page.waitForFunction(
      (id) => document.querySelector(`tr[data-identifier="${id}"]`) === null,
      {},
      line,
    );
    const alone = (await ui.stack.operator('GET', `/clients/${CLIENT}/people/${line}`)).json<{
      person: string;
    }>();
    expect(alone.person).toBe(line);

    await ui.page.type('#f-identifiers', `${line}\nnobody`);
    await ui.page.click('form[aria-label="Link identifiers"] button[type=submit]');
    await ui.waitForText(
      '[data-field="identifiers"] .field-error',
      /^line 2: "nobody" is not a phone number/,
    );
    await ui.page.evaluate(() => {
      (document.querySelector('#f-identifiers') as unknown as { value: string }).value = '';
    });
    await ui.page.type('#f-identifiers', `${line}\nhanako@example.jp`);
    await ui.page.click('form[aria-label="Link identifiers"] button[type=submit]');
    await ui.waitForText(
      'form[aria-label="Link identifiers"] .form-status',
      /^2 identifiers are one person\.$/,
    );
    await ui.page.waitForSelector('tr[data-identifier="hanako@example.jp"]');

    // The call job's page: its attempts by result and its answer rate, as the API counts them.
    const { results } = (await ui.stack.operator('GET', `/clients/${CLIENT}/jobs/${call.jobId}`)).json<{
      results: Record<string, number>;
    }>();
    const dialled = Object.values(results).reduce((a, b) => a + b, 0);
    expect(dialled).toBeGreaterThan(0);
    await ui.open(`#/clients/${CLIENT}/jobs/${call.jobId}`);
    await ui.page.waitForSelector('table[aria-label="Call attempts by result"]');
    const byResult = await ui.page.$$eval('table[aria-label="Call attempts by result"] tbody tr', (trs) =>
      Object.fromEntries(
        trs.map((tr) => [tr.getAttribute('data-result'), Number(tr.querySelectorAll('td')[1]!.textContent)]),
      ),
    );
    expect(
      Object.fromEntries(Object.entries(byResult as Record<string, number>).filter(([, n]) => n > 0)),
    ).toEqual(results);
    const answered = results.completed ?? 0;
    expect(await ui.text('[data-answer-rate]')).toBe(
      `Answer rate ${((100 * answered) / dialled).toFixed(1)} %: ${answered} of ${dialled} call attempts answered`,
    );
  });
});

describe('a session that ends under a page', () => {
  it('says the session expired, and returns to that page once signed in again', async () => {
    const jobId = await scheduledJob('session', 2);
    await ui.open(`#/clients/${CLIENT}/jobs/${jobId}`);
    await ui.page.waitForSelector('[data-status="scheduled"]');
    // The API stops accepting the token (revoked, or expired past its refresh): its next read is a 401.
    await ui.page.evaluate((key) => {
      const tokens = JSON.parse(sessionStorage.getItem(key) ?? '{}') as Record<string, unknown>;
      sessionStorage.setItem(key, JSON.stringify({ ...tokens, accessToken: 'revoked.token.value' }));
    }, SESSION_KEY);
    await ui.page.reload();
    await ui.page.waitForSelector('form[aria-label="Sign in"]');
    expect(await ui.text('form[aria-label="Sign in"] .note')).toBe(
      'Your session has expired. Sign in again to return to the page you were on.',
    );
    await ui.page.type('#f-username', ADMIN.username);
    await ui.page.type('#f-password', ADMIN.password);
    await ui.page.keyboard.press('Enter');
    await ui.page.waitForSelector('[data-status="scheduled"]');
    expect(ui.page.url()).toBe(`${ui.stack.consoleUrl}#/clients/${CLIENT}/jobs/${jobId}`);
  });
});

describe('the console offers each role what it may do', () => {
  let demoJob: string;

  beforeAll(async () => {
    const put = await ui.stack.operator('PUT', `/clients/${DEMO}`, {
      json: {
        maxConcurrentCalls: 1,
        callsPerSecond: 1,
        timeZone: 'Asia/Tokyo',
        callingHours: OPEN_ALWAYS,
        defaultRegion: 'JP',
      },
    });
    expect(put.status, put.body).toBe(200);
    const created = await ui.stack.operator('POST', `/clients/${DEMO}/jobs`, {
      json: {
        name: 'roles',
        channel: 'call',
        scenarioId: 'default',
        startAt: new Date(Date.now() + 3_600_000).toISOString(),
      },
    });
    expect(created.status, created.body).toBe(201);
    const { jobId, upload } = created.json<{ jobId: string; upload: { url: string } }>();
    expect((await fetch(upload.url, { method: 'PUT', body: 'phone\n090-6666-0001\n' })).status).toBe(200);
    demoJob = jobId;
  });

  /** Signs in as `username` and opens the demo client's page once its settings are shown. */
  async function openDemoAs(username: string): Promise<void> {
    await ui.clickButton('Sign out');
    await ui.signIn(username, user(username).password);
    await ui.open(`#/clients/${DEMO}`);
    await ui.page.waitForSelector('form[aria-label="Client settings"]');
    await ui.page.waitForSelector('section[aria-label="Jobs"] table');
  }

  const enabledInputs = () =>
    ui.page.$$eval(
      'form[aria-label="Client settings"] input, form[aria-label="Client settings"] select',
      (inputs) => inputs.filter((i) => !(i as unknown as { disabled: boolean }).disabled).length,
    );

  it('a viewer reads settings and jobs, and is offered nothing to change', async () => {
    await openDemoAs('demo-viewer');
    await ui.waitForText('form[aria-label="Client settings"] .note', /Read only/);
    expect(await enabledInputs()).toBe(0);
    expect(await ui.visibleButtons()).toEqual([]);
    expect(await ui.page.$('a.button[href$="/jobs/new"]:not([hidden])')).toBeNull();
    expect(await ui.page.$('form.channel-add:not([hidden])')).toBeNull();
    // The do-not-call list: read, not changed.
    await ui.open(`#/clients/${DEMO}/suppressions`);
    await ui.waitForText('section[aria-label="The list"] .form-status', /Nobody|^$/);
    expect(await ui.page.$('form[aria-label="Add to the list"]:not([hidden])')).toBeNull();
    expect(await ui.visibleButtons()).toEqual([]);
    await ui.open(`#/clients/${DEMO}/jobs/${demoJob}`);
    await ui.page.waitForSelector('[data-status="scheduled"]');
    expect(await ui.visibleButtons()).toEqual(['Download report']);
  });

  it('an operator runs jobs and pauses the client, but cannot change its settings', async () => {
    await openDemoAs('demo-operator');
    await ui.waitForText('form[aria-label="Client settings"] .note', /Read only/);
    expect(await enabledInputs()).toBe(0);
    expect(await ui.visibleButtons()).toEqual(['Pause client']);
    await ui.page.waitForSelector('a.button[href$="/jobs/new"]:not([hidden])');
    await ui.open(`#/clients/${DEMO}/jobs/${demoJob}`);
    await ui.page.waitForSelector('[data-status="scheduled"]');
    expect(await ui.visibleButtons()).toEqual(['Pause', 'Cancel job', 'Download report']);
  });

  it('the client’s admin changes its settings', async () => {
    await openDemoAs('demo');
    await ui.page.waitForFunction(
      () =>
        document
          .querySelector('form[aria-label="Client settings"] button[type=submit]')
          ?.getAttribute('disabled') === null,
    );
    expect(await enabledInputs()).toBeGreaterThan(5);
    expect(await ui.visibleButtons()).toEqual(expect.arrayContaining(['Save settings', 'Pause client']));
  });
});

/** WCAG's contrast ratio of two CSS `rgb()` colours. */
function contrast(a: string, b: string): number {
  const luminance = (css: string) => {
    const [r, g, bl] = (css.match(/[\d.]+/g) ?? []).map(Number).map((c) => {
      const s = c / 255;
      return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r! + 0.7152 * g! + 0.0722 * bl!;
  };
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi! + 0.05) / (lo! + 0.05);
}
