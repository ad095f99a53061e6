/**
 * A client's people (`/clients/{id}/people`): look a customer up by a phone number, a LINE user ID
 * or an email address, and see every identifier of theirs with whether it is on the do-not-call
 * list, and their history: every job's contact of them on every channel, newest first. An
 * operator links identifiers into one person (typed, or a CSV of people) and takes one
 * out. Contact limits count per person, and an opt-out given on one channel reaches the person
 * (`docs/people.md`).
 */
import { ApiError } from '../api.ts';
import type { App, Page } from '../app.ts';
import { field, formatNumber, formatTime, h, replace, showFieldErrors } from '../dom.ts';
import { mayDo, shownFor } from '../roles.ts';
import type { HistoryEntry, JobChannel, PersonHistoryView, PersonView, SuppressionView } from '../types.ts';
import { crumbs, problemsTable, scrollable } from './parts.ts';

/** What `POST …/people` with a CSV answers. */
interface PeopleUpload {
  readonly dataRows: number;
  readonly linked: number;
  readonly rejected: number;
  readonly problems: readonly { row: number; reason: string; value?: string }[];
}

const KIND_WORDS = { phone: 'Phone', line: 'LINE user ID', email: 'Email' } as const;
const CHANNEL_WORDS: Readonly<Record<JobChannel, string>> = {
  call: 'Call',
  line: 'LINE',
  email: 'Email',
  sms: 'SMS',
};

export function peoplePage(app: App, clientId: string): Page {
  const path = `/clients/${encodeURIComponent(clientId)}/people`;
  const person = new PersonCard(app, clientId, path);
  const search = searchForm((identifier) => person.show(identifier));
  const link = linkForm(app, path, (found) => person.show(found.identifiers[0]!.identifier));
  const upload = uploadForm(app, path);
  shownFor(app, clientId, 'operator', link, upload);
  return {
    title: `People of ${clientId}`,
    element: h(
      'main',
      {},
      crumbs(clientId, 'People'),
      h('h1', {}, `People of ${clientId}`),
      h(
        'p',
        { class: 'hint' },
        'A phone number, a LINE user ID and an email address seen together in a list row are one person: contact limits count per person, and an opt-out on one channel reaches the others.',
      ),
      h('section', { class: 'card', 'aria-label': 'Find a person' }, search),
      person.element,
      h('section', { class: 'card', 'aria-label': 'Link' }, link, upload),
    ),
  };
}

function searchForm(found: (identifier: string) => void): HTMLFormElement {
  const input = h('input', { autocomplete: 'off' });
  const form = h(
    'form',
    { role: 'search', 'aria-label': 'Find a person' },
    field('Phone, LINE user ID or email', 'identifier', input),
    h('button', { type: 'submit', class: 'primary' }, 'Find'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    if (input.value.trim()) found(input.value.trim());
  });
  return form;
}

/** The person found: each identifier, its kind, whether it is on the do-not-call list, and Unlink. */
class PersonCard {
  readonly element: HTMLElement;
  readonly #app: App;
  readonly #clientId: string;
  readonly #path: string;
  readonly #rows = h('tbody', {});
  readonly #status = h('p', { class: 'form-status', role: 'status' });
  readonly #key = h('p', { 'data-person': '' });
  readonly #history = new HistoryTable();

  constructor(app: App, clientId: string, path: string) {
    this.#app = app;
    this.#clientId = clientId;
    this.#path = path;
    this.element = h(
      'section',
      { class: 'card', 'aria-label': 'The person' },
      h('h2', {}, 'The person'),
      this.#status,
      this.#key,
      scrollable(
        { class: 'person' },
        h(
          'thead',
          {},
          h('tr', {}, ...['Identifier', 'Kind', 'Do-not-call', ''].map((label) => h('th', {}, label))),
        ),
        this.#rows,
      ),
      this.#history.element,
    );
  }

  async show(identifier: string): Promise<void> {
    this.#status.textContent = 'Reading…';
    try {
      const person = await this.#app.api.json<PersonHistoryView>(
        'GET',
        `${this.#path}/${encodeURIComponent(identifier)}/history`,
      );
      const ids = person.identifiers.map((i) => i.identifier);
      const [entries, mayUnlink] = await Promise.all([
        this.#app.api.json<{ suppressions: SuppressionView[] }>(
          'GET',
          `/clients/${encodeURIComponent(this.#clientId)}/suppressions?recipient=${ids.map(encodeURIComponent).join(',')}`,
        ),
        mayDo(this.#app, this.#clientId, 'operator'),
      ]);
      const onList = new Map(entries.suppressions.map((e) => [e.recipient, e]));
      const linked = ids.length > 1;
      this.#key.textContent = linked
        ? `${ids.length} identifiers, one person (${person.person}).`
        : 'Linked to no other identifier: a person of its own.';
      replace(
        this.#rows,
        ...person.identifiers.map((i) => this.#row(i, onList.get(i.identifier), linked && mayUnlink)),
      );
      this.#history.show(person);
      this.#status.textContent = '';
    } catch (error) {
      replace(this.#rows);
      this.#history.clear();
      this.#key.textContent = '';
      this.#status.textContent = (error as Error).message;
    }
  }

  #row(
    { identifier, kind }: PersonView['identifiers'][number],
    entry: SuppressionView | undefined,
    mayUnlink: boolean,
  ): HTMLTableRowElement {
    const unlink = h('button', { type: 'button', class: 'small danger' }, 'Unlink');
    unlink.hidden = !mayUnlink;
    unlink.setAttribute('aria-label', `Take ${identifier} out of this person`);
    unlink.addEventListener('click', () => void this.#unlink(identifier));
    const state = entry?.suppressed ? `on the list (${entry.reason ?? entry.source ?? ''})` : 'no';
    return h(
      'tr',
      { 'data-identifier': identifier },
      h('td', {}, identifier),
      h('td', {}, KIND_WORDS[kind]),
      h('td', {}, state),
      h('td', {}, unlink),
    );
  }

  async #unlink(identifier: string): Promise<void> {
    if (!confirm(`Take ${identifier} out of this person? Its contacts are counted on their own from now on.`))
      return;
    const others = [...this.#rows.querySelectorAll('tr')]
      .map((row) => row.getAttribute('data-identifier'))
      .filter((id): id is string => id !== null && id !== identifier);
    try {
      await this.#app.api.json('DELETE', `${this.#path}/${encodeURIComponent(identifier)}`);
      await this.show(others[0] ?? identifier);
      this.#status.textContent = `${identifier} was taken out.`;
    } catch (error) {
      this.#status.textContent = (error as Error).message;
    }
  }
}

/** A person's history: a row a job that contacted (or tried to contact) them, newest first. */
class HistoryTable {
  readonly element: HTMLElement;
  readonly #rows = h('tbody', {});
  readonly #summary = h('p', { 'data-history': 'summary' });

  constructor() {
    this.element = h(
      'div',
      { class: 'history' },
      h('h3', {}, 'History'),
      this.#summary,
      scrollable(
        { class: 'history' },
        h('caption', { class: 'visually-hidden' }, 'Every job that contacted this person, newest first'),
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            ...['Last change', 'Job', 'Channel', 'To', 'Outcome', 'Attempts', 'Length', 'Why'].map((label) =>
              h('th', { scope: 'col' }, label),
            ),
          ),
        ),
        this.#rows,
      ),
    );
    this.element.hidden = true;
  }

  show(person: PersonHistoryView): void {
    this.element.hidden = false;
    const shown = person.history.length;
    this.#summary.textContent =
      shown === 0
        ? 'No job has contacted this person yet (tasks are kept 90 days after they end).'
        : person.more
          ? `The newest ${formatNumber(shown)} contacts; older ones are in each job's report.`
          : `${formatNumber(shown)} ${shown === 1 ? 'contact' : 'contacts'}, newest first.`;
    replace(this.#rows, ...person.history.map((entry) => historyRow(entry)));
  }

  clear(): void {
    this.element.hidden = true;
    replace(this.#rows);
  }
}

function historyRow(entry: HistoryEntry): HTMLTableRowElement {
  const outcome = [entry.state, entry.result, entry.delivery].filter((w) => w !== undefined);
  const why = [
    ...(entry.tried ?? []).map((t) => `${CHANNEL_WORDS[t.channel]}: ${t.reason}`),
    ...(entry.reason ? [entry.reason] : []),
  ];
  return h(
    'tr',
    { 'data-job': entry.jobId },
    h('td', {}, formatTime(entry.updatedAt)),
    h('td', {}, entry.jobName ?? entry.jobId),
    h('td', {}, CHANNEL_WORDS[entry.channel]),
    h('td', {}, entry.recipient),
    h('td', {}, [...new Set(outcome)].join(' · ')),
    h('td', { class: 'number' }, formatNumber(entry.attempts)),
    h('td', { class: 'number' }, entry.durationSeconds === undefined ? '' : lengthOf(entry.durationSeconds)),
    h('td', {}, why.join('; ')),
  );
}

/** A call's length as m:ss. */
function lengthOf(seconds: number): string {
  return `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, '0')}`;
}

/** Identifiers typed in, one a line or separated by commas, made one person. */
function linkForm(app: App, path: string, linked: (person: PersonView) => void): HTMLFormElement {
  const identifiers = h('textarea', { rows: 3 });
  const status = h('p', { class: 'form-status', role: 'status' });
  const form = h(
    'form',
    { novalidate: true, 'aria-label': 'Link identifiers' },
    h('h2', {}, 'Link identifiers'),
    field(
      'Identifiers',
      'identifiers',
      identifiers,
      'Two or more phone numbers, LINE user IDs or email addresses of one customer, one a line',
    ),
    h('p', { class: 'form-errors', role: 'alert' }),
    h('button', { type: 'submit', class: 'primary' }, 'Link'),
    status,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    showFieldErrors(form, {});
    const list = identifiers.value
      .split(/[\n,]/)
      .map((r) => r.trim())
      .filter(Boolean);
    try {
      const person = await app.api.json<PersonView>('POST', path, { identifiers: list });
      status.textContent = `${formatNumber(person.identifiers.length)} identifiers are one person.`;
      identifiers.value = '';
      linked(person);
    } catch (error) {
      status.textContent = '';
      const fieldErrors = error instanceof ApiError ? error.fieldErrors : {};
      // `identifiers[1]` is the second line: shown under the one box.
      const messages = Object.entries(fieldErrors).flatMap(([key, reasons]) =>
        reasons.map((reason) =>
          key === 'identifiers' ? reason : `line ${Number(key.slice(12, -1)) + 1}: ${reason}`,
        ),
      );
      if (messages.length > 0) {
        // In the operator's words ("line 2: …"), not the API's field names.
        form.querySelector('[data-field="identifiers"] .field-error')!.textContent = messages.join(' ');
        identifiers.setAttribute('aria-invalid', 'true');
      } else form.querySelector('.form-errors')!.textContent = (error as Error).message;
    }
  });
  return form;
}

/** A CSV of people, a row each (phone, LINE user ID and email columns). */
function uploadForm(app: App, path: string): HTMLFormElement {
  const file = h('input', { type: 'file', accept: '.csv,.tsv,.txt,text/csv' });
  const result = h('div', { class: 'result', 'aria-live': 'polite' });
  const form = h(
    'form',
    { novalidate: true, 'aria-label': 'Upload people' },
    h('h2', {}, 'Upload people'),
    field(
      'CSV file',
      'people.file',
      file,
      'A row a customer: 電話番号, LINEユーザーID, メールアドレス columns (any of them)',
    ),
    h('p', { class: 'form-errors', role: 'alert' }),
    h('button', { type: 'submit' }, 'Upload'),
    result,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    showFieldErrors(form, {});
    const chosen = file.files?.[0];
    if (!chosen) return showFieldErrors(form, { 'people.file': ['choose a CSV file'] });
    try {
      const response = await app.api.fetch('POST', path, {
        body: chosen,
        headers: { 'content-type': 'text/csv' },
      });
      const answer = (await response.json()) as PeopleUpload;
      replace(
        result,
        h(
          'p',
          { 'data-upload': 'counts' },
          `${formatNumber(answer.dataRows)} rows: ${formatNumber(answer.linked)} linked, ${formatNumber(answer.rejected)} rejected.`,
        ),
        problemsTable('Rows not linked', answer.problems),
      );
    } catch (error) {
      const fieldErrors = error instanceof ApiError ? error.fieldErrors : {};
      if (fieldErrors.file) showFieldErrors(form, { 'people.file': fieldErrors.file });
      else form.querySelector('.form-errors')!.textContent = (error as Error).message;
    }
  });
  return form;
}
