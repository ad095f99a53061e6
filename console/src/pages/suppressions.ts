/**
 * A client's do-not-call (suppression) list (`/clients/{id}/suppressions`): every entry with where
 * it came from, why and when, a page at a time; an operator adds numbers or LINE user ids with a
 * reason, uploads a CSV of them, and takes one off the list. None of the client's jobs contacts a
 * recipient on it (`docs/suppression-list.md`).
 */
import { ApiError } from '../api.ts';
import type { App, Page } from '../app.ts';
import { field, formatNumber, formatTime, h, replace, showFieldErrors } from '../dom.ts';
import { mayDo, shownFor } from '../roles.ts';
import type { SuppressionView } from '../types.ts';
import { crumbs, problemsTable, scrollable } from './parts.ts';

const PAGE = 50;

/** What `POST …/suppressions` with a CSV answers (`shared/suppressions/api.ts`). */
interface UploadAnswer {
  readonly dataRows: number;
  readonly added: number;
  readonly rejected: number;
  readonly skipped: number;
  readonly problems: readonly { row: number; column?: string; reason: string; value?: string }[];
}

const SOURCE_WORDS: Readonly<Record<string, string>> = {
  api: 'added by an operator',
  csv: 'uploaded list',
  'line-unfollow': 'LINE unfollow',
  'call-outcome': 'asked on a call',
  'sms-stop': 'texted STOP',
};

export function suppressionsPage(app: App, clientId: string): Page {
  const path = `/clients/${encodeURIComponent(clientId)}/suppressions`;
  const list = new SuppressionList(app, path, clientId);
  const add = addForm(app, path, () => list.reload());
  const upload = uploadForm(app, path, () => list.reload());
  shownFor(app, clientId, 'operator', add, upload);
  list.reload();
  return {
    title: `Do-not-call list of ${clientId}`,
    element: h(
      'main',
      {},
      crumbs(clientId, 'Do-not-call list'),
      h('h1', {}, `Do-not-call list of ${clientId}`),
      h(
        'p',
        { class: 'hint' },
        'No job of this client calls or messages anyone on this list, whatever its list says.',
      ),
      h('section', { class: 'card', 'aria-label': 'Add' }, add, upload),
      list.element,
    ),
  };
}

/** The list, 50 entries a page, each with its Remove (for an operator). */
class SuppressionList {
  readonly element: HTMLElement;
  readonly #app: App;
  readonly #path: string;
  readonly #clientId: string;
  readonly #rows = h('tbody', {});
  readonly #more = h('button', { type: 'button', hidden: true }, 'More');
  readonly #status = h('p', { class: 'form-status', role: 'status' });
  #next: string | undefined;
  #mayRemove = false;

  constructor(app: App, path: string, clientId: string) {
    this.#app = app;
    this.#path = path;
    this.#clientId = clientId;
    this.#more.addEventListener('click', () => void this.#read(true));
    this.element = h(
      'section',
      { class: 'card', 'aria-label': 'The list' },
      h('h2', {}, 'On the list'),
      this.#status,
      scrollable(
        { class: 'suppressions' },
        h(
          'thead',
          {},
          h('tr', {}, ...['Recipient', 'Source', 'Reason', 'Added', ''].map((label) => h('th', {}, label))),
        ),
        this.#rows,
      ),
      this.#more,
    );
  }

  reload(): void {
    void this.#read(false);
  }

  async #read(append: boolean): Promise<void> {
    this.#status.textContent = 'Reading…';
    try {
      this.#mayRemove = await mayDo(this.#app, this.#clientId, 'operator');
      const next = append && this.#next ? `&next=${encodeURIComponent(this.#next)}` : '';
      const page = await this.#app.api.json<{ suppressions: SuppressionView[]; next?: string }>(
        'GET',
        `${this.#path}?limit=${PAGE}${next}`,
      );
      const rows = page.suppressions.map((entry) => this.#row(entry));
      if (append) this.#rows.append(...rows);
      else replace(this.#rows, ...rows);
      this.#next = page.next;
      this.#more.hidden = !page.next;
      this.#status.textContent = this.#rows.children.length === 0 ? 'Nobody is on the list.' : '';
    } catch (error) {
      this.#status.textContent = (error as Error).message;
    }
  }

  #row(entry: SuppressionView): HTMLTableRowElement {
    const remove = h('button', { type: 'button', class: 'small danger' }, 'Remove');
    remove.hidden = !this.#mayRemove;
    remove.setAttribute('aria-label', `Remove ${entry.recipient} from the list`);
    remove.addEventListener('click', () => void this.#remove(entry.recipient));
    return h(
      'tr',
      { 'data-recipient': entry.recipient },
      h('td', {}, entry.recipient),
      h('td', {}, SOURCE_WORDS[entry.source ?? ''] ?? entry.source ?? ''),
      h('td', {}, entry.reason ?? ''),
      h('td', {}, formatTime(entry.addedAt)),
      h('td', {}, remove),
    );
  }

  async #remove(recipient: string): Promise<void> {
    if (!confirm(`Take ${recipient} off the do-not-call list? Jobs may contact them again.`)) return;
    try {
      await this.#app.api.json('DELETE', `${this.#path}/${encodeURIComponent(recipient)}`);
      this.#status.textContent = `${recipient} is off the list.`;
      this.#rows.querySelector(`tr[data-recipient="${CSS.escape(recipient)}"]`)?.remove();
    } catch (error) {
      this.#status.textContent = (error as Error).message;
    }
  }
}

/** Numbers or LINE user ids typed in, one a line or separated by commas, with a reason. */
function addForm(app: App, path: string, added: () => void): HTMLFormElement {
  const recipients = h('textarea', { rows: 3 });
  const reason = h('input', { maxlength: 500 });
  const status = h('p', { class: 'form-status', role: 'status' });
  const form = h(
    'form',
    { novalidate: true, 'aria-label': 'Add to the list' },
    h('h2', {}, 'Add to the list'),
    field('Recipients', 'recipients', recipients, 'Phone numbers or LINE user IDs, one a line (up to 100)'),
    field('Reason', 'reason', reason, 'Why they may not be contacted, e.g. asked on the phone'),
    h('p', { class: 'form-errors', role: 'alert' }),
    h('button', { type: 'submit', class: 'primary' }, 'Add to the list'),
    status,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    showFieldErrors(form, {});
    const list = recipients.value
      .split(/[\n,]/)
      .map((r) => r.trim())
      .filter(Boolean);
    try {
      const answer = await app.api.json<{ suppressions: SuppressionView[] }>('POST', path, {
        recipients: list,
        ...(reason.value.trim() ? { reason: reason.value.trim() } : {}),
      });
      status.textContent = `${formatNumber(answer.suppressions.length)} added.`;
      recipients.value = '';
      added();
    } catch (error) {
      status.textContent = '';
      if (error instanceof ApiError) showFieldErrors(form, error.fieldErrors);
      const summary = form.querySelector('.form-errors')!;
      if (!(error instanceof ApiError) || Object.keys(error.fieldErrors).length === 0)
        summary.textContent = (error as Error).message;
    }
  });
  return form;
}

/** A CSV of numbers or LINE user ids (the headers a call or message list has), with a reason. */
function uploadForm(app: App, path: string, added: () => void): HTMLFormElement {
  const file = h('input', { type: 'file', accept: '.csv,.tsv,.txt,text/csv' });
  const reason = h('input', { maxlength: 500 });
  const result = h('div', { class: 'result', 'aria-live': 'polite' });
  const form = h(
    'form',
    { novalidate: true, 'aria-label': 'Upload a list' },
    h('h2', {}, 'Upload a list'),
    field('CSV file', 'file', file, 'A phone number column (電話番号, TEL, phone) or a LINE user ID column'),
    // Its own name: the add form above has a `reason` too, and ids must differ.
    field('Reason for the whole list', 'upload.reason', reason),
    h('p', { class: 'form-errors', role: 'alert' }),
    h('button', { type: 'submit' }, 'Upload'),
    result,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    showFieldErrors(form, {});
    const chosen = file.files?.[0];
    if (!chosen) return showFieldErrors(form, { file: ['choose a CSV file'] });
    const query = reason.value.trim() ? `?reason=${encodeURIComponent(reason.value.trim())}` : '';
    try {
      const response = await app.api.fetch('POST', `${path}${query}`, {
        body: chosen,
        headers: { 'content-type': 'text/csv' },
      });
      showUpload(result, (await response.json()) as UploadAnswer);
      added();
    } catch (error) {
      if (error instanceof ApiError) showFieldErrors(form, error.fieldErrors);
      if (!(error instanceof ApiError) || Object.keys(error.fieldErrors).length === 0)
        form.querySelector('.form-errors')!.textContent = (error as Error).message;
    }
  });
  return form;
}

function showUpload(result: HTMLElement, answer: UploadAnswer): void {
  replace(
    result,
    h(
      'p',
      { 'data-upload': 'counts' },
      `${formatNumber(answer.dataRows)} rows: ${formatNumber(answer.added)} added, ${formatNumber(answer.rejected)} rejected, ${formatNumber(answer.skipped)} skipped.`,
    ),
    problemsTable('Rows not added', answer.problems),
  );
}
