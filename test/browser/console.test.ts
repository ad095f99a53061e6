/**
 * The console in a real browser (headless Chromium from @sparticuz/chromium, which `npm ci`
 * installs, driven by puppeteer-core) against the local stack with its broker fleet: an operator
 * signs in, creates a client (a field error first), uploads a list and sees its rejected rows with
 * the Japanese text intact, watches the job complete, downloads the report and checks its rows,
 * pauses and resumes a second job (with the mouse, then with the keyboard alone), shows a retrying
 * state while the API cannot be reached and recovers, refuses a list that is not a CSV with the API's
 * reason and one over the size limit before uploading; a user of one client sees only that client.
 * Every input is labelled and the controls are reached with the keyboard. Screenshots go to
 * `.test-results/screenshots` (`SCREENSHOTS_DIR=docs/screenshots` refreshes those docs/console.md shows).
 */
import { mkdirSync, mkdtempSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CDPSession, HTTPRequest, Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_CONSOLE_USERS, type LocalStack } from '#local/stack.ts';
import { MAX_UPLOAD_BYTES, uploadTooLargeReason } from '#shared/jobs/upload-limit.ts';
import { ConsoleBrowser, type PageElement, SCREENSHOTS } from '../support/console-browser.ts';

declare const document: {
  activeElement: PageElement | null;
  querySelector(selector: string): PageElement | null;
  fonts: {
    check(font: string, text: string): boolean;
    load(font: string, text: string): Promise<unknown[]>;
    ready: Promise<unknown>;
  };
};

const CLIENT = `web-${process.pid}`;
const [ADMIN, DEMO_USER] = LOCAL_CONSOLE_USERS as [
  (typeof LOCAL_CONSOLE_USERS)[0],
  (typeof LOCAL_CONSOLE_USERS)[0],
];

let ui: ConsoleBrowser;
let stack: LocalStack;
let page: Page;
let work: string;
/** The paused and resumed job, which another client's user must not be offered to act on. */
let secondJobId: string;

beforeAll(async () => {
  work = mkdtempSync(path.join(os.tmpdir(), 'switchboard-browser-'));
  ui = await ConsoleBrowser.start({ stage: 'browser', fleet: true, telephonyTimeScale: 60 });
  stack = ui.stack;
  page = ui.page;
}, 180_000);

afterAll(async () => {
  await ui?.stop();
});

const unlabelledInputs = () => ui.unlabelledInputs();
const text = (selector: string) => ui.text(selector);
const waitForText = (selector: string, pattern: RegExp, timeout?: number) =>
  ui.waitForText(selector, pattern, timeout);
const signIn = (username: string, password: string) => ui.signIn(username, password);
const setInput = (selector: string, value: string) => ui.setInput(selector, value);
const clickButton = (label: string) => ui.clickButton(label);
const chooseFile = (file: string) => ui.chooseFile(file);
const tabTo = (label: string) => ui.tabTo(label);

const LIST = [
  '電話番号,名前,メモ',
  '090-1111-0001,山田太郎,初回',
  '090-1111-0002,佐藤花子,',
  '電話できない,鈴木一郎,番号なし',
  '090-1111-0003,高橋,',
  '090-1111-0001,山田太郎,重複',
].join('\r\n');

describe('the operator console in a browser', () => {
  it('signs in, creates a client (a field error first), with every input labelled', async () => {
    await signIn(ADMIN.username, ADMIN.password);
    expect(await unlabelledInputs()).toEqual([]);
    await page.type('#f-clientId', CLIENT);
    await page.keyboard.press('Enter');
    await page.waitForSelector('form[aria-label="Client settings"]');
    expect(await unlabelledInputs()).toEqual([]);
    // Every day open all day, so the jobs run whenever the test does.
    for (const day of ['Saturday', 'Sunday']) await page.click(`button[aria-label="Add a ${day} window"]`);
    await page.$$eval('input[aria-label$=" from"]', (inputs) => {
      for (const input of inputs) (input as unknown as PageElement).value = '00:00';
    });
    await page.$$eval('input[aria-label$=" until"]', (inputs) => {
      for (const input of inputs) (input as unknown as PageElement).value = '24:00';
    });
    await setInput('#f-maxConcurrentCalls', '3');
    await setInput('#f-callsPerSecond', '0');
    await page.click('form[aria-label="Client settings"] button[type=submit]');
    await waitForText('[data-field="callsPerSecond"] .field-error', /callsPerSecond/);
    expect(await page.$eval('#f-callsPerSecond', (e) => e.getAttribute('aria-invalid'))).toBe('true');
    await setInput('#f-callsPerSecond', '2');
    // A restricted period that ends before it starts is named at its field (issue 14 #3).
    await setInput('#f-restrictedPeriods', '2026-12-31..2026-12-30 year-end');
    await page.click('form[aria-label="Client settings"] button[type=submit]');
    await waitForText('[data-field="restrictedPeriods"] .field-error', /ends before it starts/);
    await setInput('#f-restrictedPeriods', '');
    await page.click('form[aria-label="Client settings"] button[type=submit]');
    await waitForText('form[aria-label="Client settings"] .form-errors', /Saved/);
    await page.waitForSelector('a.button[href$="/jobs/new"]');
  });

  it('uploads a list and shows its rejected rows with the Japanese text intact', async () => {
    const csv = path.join(work, 'list.csv');
    writeFileSync(csv, LIST);
    await page.click('a.button[href$="/jobs/new"]');
    await page.waitForSelector('form[aria-label="New job"]');
    expect(await unlabelledInputs()).toEqual([]);
    await page.type('#f-name', '初回のお知らせ');
    await setInput('#f-maxAttempts', '1');
    const input = await page.$('#f-file');
    await (input as unknown as { uploadFile(p: string): Promise<void> }).uploadFile(csv);
    await page.$eval('#f-file', (e) => e.dispatchEvent(new Event('change')));
    await page.click('form[aria-label="New job"] button[type=submit]');
    await page.waitForSelector('table[aria-label="Rejected and skipped rows"]', { timeout: 60_000 });
    expect(await text('[data-count="rows"]')).toBe('5');
    expect(await text('[data-count="tasks"]')).toBe('3');
    const problems = await page.$$eval('table[aria-label="Rejected and skipped rows"] tbody tr', (rows) =>
      rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent)),
    );
    expect(problems).toEqual([
      ['4', 'rejected', '電話番号', expect.stringMatching(/phone|number/i), '電話できない'],
      ['6', 'skipped', '電話番号', expect.stringMatching(/duplicate of row 2/), '090-1111-0001'],
    ]);
    // The console's own font draws the Japanese (the machine has none): its subsets for these
    // characters load (the browser fetches a unicode-range subset when text needs it), then draw.
    const loaded = await page.evaluate(
      async () => (await document.fonts.load('16px "Noto Sans JP"', '電話番号')).length,
    );
    expect(loaded).toBeGreaterThan(0);
    expect(await page.evaluate(() => document.fonts.check('16px "Noto Sans JP"', '電話番号'))).toBe(true);
    await page.evaluate(() => document.fonts.ready);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'upload-result.png'), fullPage: true });
  });

  it('watches the job complete and downloads its report', async () => {
    await page.click('.result a.button');
    await page.waitForSelector('[data-status]');
    await page.waitForSelector('[data-status="completed"]', { timeout: 120_000 });
    expect(await text('[data-count="completed"]')).not.toBe('');
    await page.waitForSelector('.chart .uplot');
    await page.evaluate(() => document.fonts.ready);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'job-page.png'), fullPage: true });
    const downloads = path.join(work, 'downloads');
    mkdirSync(downloads);
    const cdp = await page.createCDPSession();
    await cdp.send('Browser.setDownloadBehavior', {
      behavior: 'allow',
      downloadPath: downloads,
      eventsEnabled: true,
    });
    // Chromium reserves the file's final name with an empty file while it writes the
    // .crdownload: the file is read only once the browser says the download completed.
    const downloaded = downloadCompleted(cdp);
    // The button is reached with the keyboard: focused, then Enter.
    let clicked = false;
    for (const button of await page.$$('button')) {
      if ((await button.evaluate((b) => b.textContent)) === 'Download report') {
        await button.focus();
        await page.keyboard.press('Enter');
        clicked = true;
      }
    }
    expect(clicked).toBe(true);
    await page.waitForFunction(
      () => document.querySelector('.answer')?.textContent === 'Report downloaded.',
      {
        timeout: 60_000,
      },
    );
    const file = await downloaded;
    const report = readFileSync(path.join(downloads, file), 'utf8');
    expect(report).toContain('電話できない');
    expect(report.match(/\+819011110001|\+819011110002|\+819011110003/g)?.length).toBeGreaterThanOrEqual(3);
  });

  it('pauses and resumes a second job', async () => {
    const csv = path.join(work, 'second.csv');
    writeFileSync(
      csv,
      [
        'phone,name',
        ...Array.from({ length: 40 }, (_, i) => `090-2222-${String(i).padStart(4, '0')},n${i}`),
      ].join('\n'),
    );
    await page.goto(`${stack.consoleUrl}#/clients/${CLIENT}/jobs/new`);
    await page.waitForSelector('form[aria-label="New job"]');
    await page.type('#f-name', 'second');
    // It starts in an hour: it is still scheduled when paused.
    const later = new Date(Date.now() + 3_600_000);
    const local = new Date(later.getTime() - later.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
    await setInput('#f-startAt', local);
    const input = await page.$('#f-file');
    await (input as unknown as { uploadFile(p: string): Promise<void> }).uploadFile(csv);
    await page.$eval('#f-file', (e) => e.dispatchEvent(new Event('change')));
    await page.click('form[aria-label="New job"] button[type=submit]');
    await page.waitForSelector('.result a.button', { timeout: 60_000 });
    await page.click('.result a.button');
    await page.waitForSelector('[data-status="scheduled"]', { timeout: 30_000 });
    secondJobId = page.url().split('/').at(-1)!;
    await clickButton('Pause');
    await page.waitForSelector('[data-status="paused"]');
    expect(await text('.answer')).toBe('The job is paused.');
    await clickButton('Resume');
    await page.waitForSelector('[data-status="scheduled"]');
    expect(await text('.answer')).toBe('The job is scheduled.');
  });

  it('pauses and resumes the job with the keyboard alone: Tab to the button, Enter', async () => {
    await page.waitForSelector('[data-status="scheduled"]');
    expect(await tabTo('Pause')).toBe(true);
    await page.keyboard.press('Enter');
    await page.waitForSelector('[data-status="paused"]');
    expect(await text('.answer')).toBe('The job is paused.');
    expect(await tabTo('Resume')).toBe(true);
    await page.keyboard.press('Enter');
    await page.waitForSelector('[data-status="scheduled"]');
    expect(await text('.answer')).toBe('The job is scheduled.');
  });

  it('shows a retrying state while the API cannot be reached, keeps the job on the page, and recovers', async () => {
    let failing = true;
    const onRequest = (request: HTTPRequest) => {
      if (request.isInterceptResolutionHandled()) return;
      if (failing && request.url().includes('/console/api/')) void request.abort('failed');
      else void request.continue();
    };
    await page.setRequestInterception(true);
    page.on('request', onRequest);
    try {
      await page.waitForSelector('.poll-state.retrying', { timeout: 30_000 });
      expect(await text('.poll-state')).toMatch(/^Cannot reach the API \(.+\); retrying in \d+ s…$/);
      // Never a blank page: what was read last stays.
      expect(await page.$('[data-status="scheduled"]')).not.toBeNull();
      expect(await text('[data-count="tasks"]')).toBe('40');
      failing = false;
      await page.waitForSelector('.poll-state:not(.retrying)', { timeout: 60_000 });
      expect(await text('.poll-state')).toBe('');
      expect(await page.$('[data-status="scheduled"]')).not.toBeNull();
    } finally {
      page.off('request', onRequest);
      await page.setRequestInterception(false);
    }
  });

  it("refuses a list that is not a CSV with the API's reason at the file's field, and one over the limit before uploading", async () => {
    // PNG bytes named .csv: S3 takes the upload; the ingest refuses the list and the page says why.
    const png = path.resolve(import.meta.dirname, '../fixtures/csv/binary-png.csv');
    await page.goto(`${stack.consoleUrl}#/clients/${CLIENT}/jobs/new`);
    await page.waitForSelector('form[aria-label="New job"]');
    await page.type('#f-name', 'not a list');
    await chooseFile(png);
    await page.click('form[aria-label="New job"] button[type=submit]');
    await waitForText('form[aria-label="New job"] .form-errors', /The list was refused/);
    expect(await text('form[aria-label="New job"] .form-errors')).toBe(
      'The list was refused: not a CSV file: it is a PNG image',
    );
    expect(await text('[data-field="file"] .field-error')).toBe('file: not a CSV file: it is a PNG image');
    // The refusal is the whole answer: no "No row was rejected", no job to open.
    expect(await text('section.result')).toBe('');

    // Another file may be tried in the same form: a gigabyte and a byte (sparse: no disk), refused
    // at its field before a job is created or a byte sent.
    const huge = path.join(work, 'huge.csv');
    writeFileSync(huge, '');
    truncateSync(huge, MAX_UPLOAD_BYTES + 1);
    const jobsBefore = (await stack.operator('GET', `/clients/${CLIENT}/jobs?limit=100`)).json<{
      jobs: unknown[];
    }>().jobs.length;
    await page.waitForSelector('form[aria-label="New job"] button[type=submit]:not([disabled])');
    await chooseFile(huge);
    await page.click('form[aria-label="New job"] button[type=submit]');
    await waitForText('[data-field="file"] .field-error', /a list may be at most/);
    expect(await text('[data-field="file"] .field-error')).toBe(
      `file: ${uploadTooLargeReason(MAX_UPLOAD_BYTES + 1)}`,
    );
    expect(await page.$eval('#f-file', (e) => e.getAttribute('aria-invalid'))).toBe('true');
    const jobsAfter = (await stack.operator('GET', `/clients/${CLIENT}/jobs?limit=100`)).json<{
      jobs: unknown[];
    }>().jobs.length;
    expect(jobsAfter).toBe(jobsBefore);
  });

  it('adds a LINE channel and rotates its secret without ever showing it; looks up an opt-out', async () => {
    const secret = 'browser-first-secret-0001';
    const next = 'browser-next-secret-0002';
    const token = 'browser-access-token-0003';
    // An administrator's clients page lists every client.
    await page.goto(`${stack.consoleUrl}#/`);
    await waitForText('.client-list', new RegExp(CLIENT));
    await page.goto(`${stack.consoleUrl}#/clients/${CLIENT}`);
    await page.waitForSelector('section[aria-label="Channels"] form');
    expect(await unlabelledInputs()).toEqual([]);
    await page.type('#f-channelId', `${CLIENT}-line`);
    await page.type('#f-channelSecret', secret);
    await page.type('#f-accessToken', token);
    await page.click('section[aria-label="Channels"] button[type=submit]');
    await waitForText('h1', new RegExp(`Channel ${CLIENT}-line`));
    await waitForText('[data-fact="channel secret"]', /^set$/);
    expect(await unlabelledInputs()).toEqual([]);
    await page.type('#f-channelSecret', next);
    await page.click('section[aria-label="Rotate the secret"] button[type=submit]');
    await waitForText('[data-fact="channel secret"]', /previous one is accepted until/);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'channel-page.png'), fullPage: true });
    const html = await page.content();
    for (const value of [secret, next, token]) expect(html).not.toContain(value);

    await page.goto(`${stack.consoleUrl}#/clients/${CLIENT}/opt-outs`);
    await page.waitForSelector('#f-recipient');
    await page.type('#f-recipient', '090-1111-0001');
    await page.click('main form button[type=submit]');
    await waitForText('table.opt-outs tbody', /\+819011110001.*may be contacted/);
  });

  it('edits job defaults (a field error first) and keeps the settings the form does not show', async () => {
    const other = `${CLIENT}-defaults`;
    const telephony = { provider: 'http', baseUrl: 'http://127.0.0.1:9/' };
    const put = await stack.operator('PUT', `/clients/${other}`, {
      json: {
        maxConcurrentCalls: 1,
        callsPerSecond: 1,
        timeZone: 'Asia/Tokyo',
        callingHours: { mon: [{ start: '09:00', end: '18:00' }] },
        defaultRegion: 'JP',
        jobDefaults: { maxAttempts: 2 },
        telephony,
      },
    });
    expect(put.status, put.body).toBe(200);
    await page.goto(`${stack.consoleUrl}#/clients/${other}`);
    await page.waitForSelector('#f-jobDefaults-maxAttempts');
    expect(await page.$eval('#f-jobDefaults-maxAttempts', (e) => (e as unknown as PageElement).value)).toBe(
      '2',
    );
    expect(await unlabelledInputs()).toEqual([]);
    await setInput('#f-jobDefaults-maxAttempts', '11');
    await page.click('form[aria-label="Client settings"] button[type=submit]');
    await waitForText('[data-field="jobDefaults.maxAttempts"] .field-error', /maxAttempts/);
    await setInput('#f-jobDefaults-maxAttempts', '3');
    await setInput('#f-jobDefaults-retryDelaySeconds', '600');
    // Retries by outcome, as a form: a bad one is named at its field too.
    await setInput('#f-jobDefaults-retries-busy-maxAttempts', '3');
    await page.click('form[aria-label="Client settings"] button[type=submit]');
    await waitForText(
      '[data-field="jobDefaults.retries.busy.delay"] .field-error',
      /jobDefaults\.retries\.busy\.delay/,
    );
    const retries = {
      busy: { maxAttempts: 3, delay: { kind: 'list', seconds: [1800, 3600] } },
      'no-answer': { maxAttempts: 1 },
    };
    await setInput('#f-jobDefaults-retries-busy-delay', '30, 60');
    await setInput('#f-jobDefaults-retries-no-answer-maxAttempts', '1');
    await page.click('form[aria-label="Client settings"] button[type=submit]');
    await waitForText('form[aria-label="Client settings"] .form-errors', /Saved/);
    const saved = (await stack.operator('GET', `/clients/${other}`)).json<Record<string, unknown>>();
    expect(saved.jobDefaults).toEqual({ maxAttempts: 3, retryDelaySeconds: 600, retries });
    expect(saved.telephony).toEqual(telephony);
  });

  it('a user of the demo client sees only the demo client, and not this one', async () => {
    await clickButton('Sign out');
    await signIn(DEMO_USER.username, DEMO_USER.password);
    const clients = await page.$$eval('.client-list a', (links) => links.map((a) => a.textContent));
    expect(clients).toEqual(['demo-client']);
    await page.goto(`${stack.consoleUrl}#/clients/${CLIENT}`);
    await waitForText('main section', new RegExp(`do not belong to client ${CLIENT}`));
    // Another client's job: its refusal, and nothing to press.
    await page.goto(`${stack.consoleUrl}#/clients/${CLIENT}/jobs/${secondJobId}`);
    await waitForText('.poll-state', /do not belong to client/);
    expect(await ui.visibleButtons()).toEqual([]);
  });
});

/** The file name of the next download, once Chromium reports it completed (CDP events). */
function downloadCompleted(cdp: CDPSession): Promise<string> {
  return new Promise((resolve, reject) => {
    const names = new Map<string, string>();
    cdp.on('Browser.downloadWillBegin', (e) => names.set(e.guid, e.suggestedFilename));
    cdp.on('Browser.downloadProgress', (e) => {
      if (e.state === 'completed') resolve(names.get(e.guid) ?? '');
      if (e.state === 'canceled') reject(new Error('the download was canceled'));
    });
  });
}
