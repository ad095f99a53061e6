/**
 * The console in a real browser for the browser tests: headless Chromium from @sparticuz/chromium
 * (which `npm ci` installs) driven by puppeteer-core, against a local stack of the test's own,
 * with the few page actions the tests share (sign in, type, wait for a text, press a button).
 */
import { mkdirSync } from 'node:fs';
import chromium from '@sparticuz/chromium';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { type LocalStack, type LocalStackOptions, startLocalStack } from '#local/stack.ts';

/**
 * The little of the DOM the page callbacks touch, declared here: the project is typechecked for
 * Node, whose `fetch` types the DOM's would replace.
 */
export interface PageElement {
  textContent: string | null;
  tagName: string;
  value: string;
  hidden: boolean;
  blur(): void;
  focus(): void;
  labels?: { length: number } | null;
  getAttribute(name: string): string | null;
  querySelectorAll(selector: string): PageElement[];
  dispatchEvent(event: unknown): boolean;
  getBoundingClientRect(): { left: number; right: number; width: number };
  closest(selector: string): PageElement | null;
  scrollWidth: number;
  clientWidth: number;
  offsetParent: PageElement | null;
}
declare const document: {
  activeElement: PageElement | null;
  body: PageElement;
  documentElement: PageElement;
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): PageElement[];
  fonts: {
    check(font: string, text: string): boolean;
    load(font: string, text: string): Promise<unknown[]>;
    ready: Promise<unknown>;
  };
};
declare const Event: new (type: string) => unknown;

export const SCREENSHOTS = process.env.SCREENSHOTS_DIR ?? '.test-results/screenshots';

/** A local stack, a browser and one page on the console. */
export class ConsoleBrowser {
  readonly stack: LocalStack;
  readonly browser: Browser;
  readonly page: Page;

  private constructor(stack: LocalStack, browser: Browser, page: Page) {
    this.stack = stack;
    this.browser = browser;
    this.page = page;
  }

  static async start(options: LocalStackOptions): Promise<ConsoleBrowser> {
    process.env.LOG_LEVEL = 'error';
    mkdirSync(SCREENSHOTS, { recursive: true });
    const stack = await startLocalStack(options);
    const browser = await puppeteer.launch({
      executablePath: await chromium.executablePath(),
      // The browser's language from the machine's locale may be 'en-US@posix', which Intl (and so
      // uPlot) refuses; an operator's browser has a real one.
      args: [...chromium.args, '--lang=en-US'],
      env: { ...process.env, LANG: 'en_US.UTF-8', LC_ALL: 'en_US.UTF-8' },
      headless: true,
    });
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    // Confirmations (pause, resume, cancel) are accepted, as the operator would.
    page.on('dialog', (dialog) => void dialog.accept());
    return new ConsoleBrowser(stack, browser, page);
  }

  async stop(): Promise<void> {
    await this.browser?.close();
    await this.stack?.stop();
  }

  /**
   * Opens a page of the console by its hash (`#/clients/x`), loaded anew even when it is the page
   * shown (a `goto` to the same URL only changes nothing, and a form would keep its last state).
   */
  async open(hash: string): Promise<void> {
    const url = `${this.stack.consoleUrl}${hash}`;
    if (this.page.url() === url) await this.page.reload();
    else await this.page.goto(url);
  }

  async signIn(username: string, password: string): Promise<void> {
    await this.page.goto(this.stack.consoleUrl);
    await this.page.waitForSelector('form[aria-label="Sign in"]');
    await this.page.type('#f-username', username);
    await this.page.type('#f-password', password);
    // By keyboard: Enter in the password field submits.
    await this.page.keyboard.press('Enter');
    await this.page.waitForFunction(() => document.querySelector('h1')?.textContent === 'Clients', {
      timeout: 20_000,
    });
  }

  async text(selector: string): Promise<string> {
    return this.page.$eval(selector, (e) => e.textContent ?? '');
  }

  async waitForText(selector: string, pattern: RegExp, timeout = 60_000): Promise<void> {
    await this.page.waitForFunction(
      (sel, source) => new RegExp(source).test(document.querySelector(sel)?.textContent ?? ''),
      { timeout, polling: 200 },
      selector,
      pattern.source,
    );
  }

  async setInput(selector: string, value: string): Promise<void> {
    await this.page.$eval(
      selector,
      (e, v) => {
        (e as unknown as PageElement).value = v;
      },
      value,
    );
  }

  /** Every input, select and textarea on the page that has no label (for= or aria-label). */
  async unlabelledInputs(): Promise<string[]> {
    return this.page.$$eval('input:not([type=file]), select, textarea', (elements) =>
      elements
        .filter((e) => (e as unknown as PageElement).labels?.length === 0 && !e.getAttribute('aria-label'))
        .map((e) => e.outerHTML),
    );
  }

  /** The buttons a user sees (rendered, not hidden by an attribute or a style), by their text. */
  async visibleButtons(): Promise<string[]> {
    return this.page.$$eval('main button', (buttons) =>
      buttons
        .filter((b) => (b as unknown as PageElement).offsetParent !== null)
        .map((b) => b.textContent ?? ''),
    );
  }

  async clickButton(label: string): Promise<void> {
    for (const button of await this.page.$$('button')) {
      const [name, hidden] = await button.evaluate((b) => [b.textContent, b.hidden] as const);
      if (name === label && !hidden) {
        await button.click();
        return;
      }
    }
    throw new Error(`no button "${label}"`);
  }

  /** Chooses `file` in the new job form's file input, as a user's pick does. */
  async chooseFile(file: string): Promise<void> {
    const input = await this.page.$('#f-file');
    await (input as unknown as { uploadFile(p: string): Promise<void> }).uploadFile(file);
    await this.page.$eval('#f-file', (e) => e.dispatchEvent(new Event('change')));
  }

  /**
   * Presses Tab until the button named `label` has the focus: true once it has (it is in the page's
   * tab order), false when it never comes round.
   */
  async tabTo(label: string): Promise<boolean> {
    await this.page.evaluate(() => document.activeElement?.blur());
    for (let presses = 0; presses < 80; presses++) {
      await this.page.keyboard.press('Tab');
      const focused = await this.page.evaluate(() => {
        const e = document.activeElement;
        return e?.tagName === 'BUTTON' ? e.textContent : null;
      });
      if (focused === label) return true;
    }
    return false;
  }

  /** What has the focus: its tag and text (`BODY` when nothing does). */
  async focused(): Promise<{ tag: string; text: string }> {
    return this.page.evaluate(() => ({
      tag: document.activeElement?.tagName ?? 'BODY',
      text: document.activeElement?.textContent ?? '',
    }));
  }
}
