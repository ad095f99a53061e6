/**
 * A new job: its options (errors at their fields), a CSV dropped or chosen, uploaded straight to
 * the presigned S3 URL with a progress bar, then the ingest's result as soon as it is known —
 * rows, tasks, and the first rejected or skipped rows with row, column and reason.
 */
import { uploadTooLargeReason } from '#shared/jobs/upload-limit.ts';
import { ApiError, uploadFile } from '../api.ts';
import type { App, Page } from '../app.ts';
import { field, formatNumber, h, replace, showFieldErrors } from '../dom.ts';
import { poll } from '../poll.ts';
import { editableFor } from '../roles.ts';
import type { JobView, RowProblem } from '../types.ts';
import { callingHoursEditor } from './calling-hours-editor.ts';
import { countList, crumbs, dropZone, scrollable } from './parts.ts';

export function newJobPage(app: App, clientId: string): Page {
  const path = `/clients/${encodeURIComponent(clientId)}`;
  const content = contentFields();
  const schedule = scheduleFields();
  const fallback = fallbackFields();
  const options = optionFields(content.scenarioField, fallback.element);
  const { channel } = options;
  const chain = () => [channel.value, ...fallback.value(channel.value)];
  const syncChannel = () => {
    fallback.forChannel(channel.value);
    content.forChannels(chain());
    schedule.forChannel(channel.value);
  };
  channel.addEventListener('change', syncChannel);
  fallback.element.addEventListener('change', syncChannel);
  syncChannel();
  const list = listField(chain);
  const readOnly = h('p', { class: 'note', role: 'status' });
  const ui = uploadUi();
  const form = h(
    'form',
    { class: 'card', novalidate: true, 'aria-label': 'New job' },
    options.element,
    schedule.element,
    ...content.sent,
    list.element,
    ui.progress,
    ui.note,
    ui.status,
    readOnly,
    h('div', { class: 'actions' }, ui.submit),
  );
  editableFor(app, clientId, 'operator', form, readOnly);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const jobOptions = () => ({
      ...options.value(chain()),
      ...content.value(chain()),
      ...schedule.value(channel.value),
    });
    await submitJob(app, path, list.chosen(), jobOptions, { ...ui, form });
  });
  return {
    title: 'New job',
    element: h('main', {}, crumbs(clientId, 'new job'), h('h1', {}, 'New job'), form, ui.result),
  };
}

/** The job's name, channel (and the channels it falls back to), start and attempts, with the call scenario's field among them. */
function optionFields(scenarioField: HTMLElement, fallbackField: HTMLElement) {
  const name = h('input', { required: true, maxlength: 200 });
  const channel = h(
    'select',
    {},
    h('option', { value: 'call' }, 'Call'),
    h('option', { value: 'line' }, 'LINE message'),
    h('option', { value: 'email' }, 'Email'),
    h('option', { value: 'sms' }, 'SMS'),
  );
  const startAt = h('input', { type: 'datetime-local' });
  const maxAttempts = h('input', { type: 'number', min: 1, max: 10, value: '3' });
  const retryDelay = h('input', { type: 'number', min: 0, value: '600' });
  const element = h(
    'div',
    { class: 'grid' },
    field('Name', 'name', name),
    field('Channel', 'channel', channel),
    fallbackField,
    scenarioField,
    field('Start at (your time)', 'startAt', startAt, 'Empty: now'),
    field('Attempts per task', 'maxAttempts', maxAttempts),
    field('Seconds between attempts', 'retryDelaySeconds', retryDelay),
  );
  const value = (channels: readonly string[]): Record<string, unknown> => ({
    name: name.value.trim(),
    // One channel, or the list a fallback job tries in order (the API's `channel`).
    channel: channels.length === 1 ? channels[0] : channels,
    ...(startAt.value ? { startAt: new Date(startAt.value).toISOString() } : {}),
    ...(maxAttempts.value ? { maxAttempts: Number(maxAttempts.value) } : {}),
    ...(retryDelay.value ? { retryDelaySeconds: Number(retryDelay.value) } : {}),
  });
  return { element, channel, value };
}

const MESSAGE_CHANNELS = [
  ['line', 'LINE'],
  ['email', 'Email'],
  ['sms', 'SMS'],
] as const;

/**
 * Where a message job's task goes when its channel cannot reach the person (not a friend, opted
 * out, no identifier for it, a hard bounce…): up to two more message channels, in order
 * (`docs/fallback.md`). A call job has one channel.
 */
function fallbackFields() {
  const choice = () =>
    h(
      'select',
      {},
      h('option', { value: '' }, 'Nowhere: the task ends'),
      ...MESSAGE_CHANNELS.map(([value, label]) => h('option', { value }, label)),
    );
  const first = choice();
  const second = choice();
  const secondField = field('Then', 'fallback-2', second);
  const element = h(
    'fieldset',
    { class: 'grid', 'data-field': 'fallback' },
    h('legend', {}, 'When the channel cannot reach the person, try'),
    field(
      'Next',
      'fallback-1',
      first,
      'Same task, same contact-limit slot; the report says which channel reached them',
    ),
    secondField,
  );
  return {
    element,
    /** Shown for a message channel; a channel already in the chain cannot be picked again. */
    forChannel(channel: string) {
      element.hidden = channel === 'call';
      for (const [select, taken] of [
        [first, [channel]],
        [second, [channel, first.value]],
      ] as const) {
        for (const option of select.options)
          option.disabled = option.value !== '' && taken.includes(option.value);
        if (select.selectedOptions[0]?.disabled) select.value = '';
      }
      secondField.hidden = first.value === '';
      if (secondField.hidden) second.value = '';
    },
    value(channel: string): string[] {
      if (channel === 'call') return [];
      return [first.value, second.value].filter((c) => c !== '');
    },
  };
}

/** The list's field: a drop zone over a hidden file input, and a template for the channels chosen. */
function listField(channels: () => readonly string[]) {
  const file = h('input', { type: 'file', accept: '.csv,.tsv,.txt,text/csv' });
  const drop = dropZone(file);
  const element = h(
    'div',
    { class: 'field', 'data-field': 'file' },
    h('label', { for: 'f-file' }, 'The list (CSV)'),
    drop.element,
    file,
    h('p', { class: 'hint' }, templateLink(channels)),
    h('p', { class: 'field-error', role: 'alert' }),
  );
  file.id = 'f-file';
  file.classList.add('visually-hidden');
  return { element, chosen: drop.chosen };
}

/** The parts of the page the upload and the ingest's answer write to, but the form. */
function uploadUi(): Omit<NewJobUi, 'form'> {
  return {
    progress: h('progress', { max: 100, value: 0, hidden: true, 'aria-label': 'Upload progress' }),
    note: h('p', { class: 'note', role: 'status' }),
    status: h('p', { class: 'form-errors', role: 'alert' }),
    result: h('section', { class: 'result', 'aria-live': 'polite' }),
    submit: h('button', { type: 'submit', class: 'primary' }, 'Create job and upload'),
  };
}

/**
 * Checks the file chosen (refused here before a byte is sent), then creates the job and uploads
 * it; the submit button stays disabled once the upload is done.
 */
async function submitJob(
  app: App,
  path: string,
  chosen: File | undefined,
  options: () => Record<string, unknown>,
  ui: NewJobUi,
): Promise<void> {
  showFieldErrors(ui.form, {});
  if (!chosen) return showFieldErrors(ui.form, { file: ['choose a CSV file'] });
  const problem = fileProblem(chosen);
  if (problem) return showFieldErrors(ui.form, { file: [problem] });
  const body = options();
  ui.submit.disabled = true;
  const ok = await createAndUpload(app, path, body, chosen, ui);
  if (!ok) ui.submit.disabled = false;
}

/** Why the file cannot be sent: empty, or over the ingest's own size rule (in its words). */
function fileProblem(chosen: File): string | undefined {
  if (chosen.size === 0) return 'the file is empty';
  return uploadTooLargeReason(chosen.size);
}

/**
 * A job's own schedule: when it ends (its tasks not done by then expire), its own calling hours in
 * place of the client's (in the client's zone), and, for a call job, each recipient's own zone for
 * the hours (`timeZoneBy: recipient`). Left alone, the job has no end and the client's hours.
 */
function scheduleFields() {
  const endAt = h('input', { type: 'datetime-local' });
  const byRecipient = h('input', { type: 'checkbox' });
  const ownHours = h('input', { type: 'checkbox' });
  const weekdays = Object.fromEntries(
    (['mon', 'tue', 'wed', 'thu', 'fri'] as const).map((day) => [day, [{ start: '09:00', end: '18:00' }]]),
  );
  const hours = callingHoursEditor(weekdays, "This job's calling hours (in the client's time zone)");
  const recipientField = field(
    "Call each recipient in their own time zone's hours",
    'timeZoneBy',
    byRecipient,
    "From the list's time zone column, else the number's country",
  );
  const sync = () => {
    hours.element.hidden = !ownHours.checked;
  };
  ownHours.addEventListener('change', sync);
  sync();
  const element = h(
    'fieldset',
    { class: 'grid schedule' },
    h('legend', {}, 'Schedule'),
    field('End at (your time)', 'endAt', endAt, 'Empty: no end. Tasks not done by then expire'),
    recipientField,
    field('Its own calling hours', 'callingHours.own', ownHours, "Unticked: the client's hours"),
    hours.element,
  );
  return {
    element,
    forChannel(channel: string) {
      recipientField.hidden = channel !== 'call';
    },
    value(channel: string): Record<string, unknown> {
      return {
        ...(endAt.value ? { endAt: new Date(endAt.value).toISOString() } : {}),
        ...(channel === 'call' && byRecipient.checked ? { timeZoneBy: 'recipient' } : {}),
        ...(ownHours.checked ? { callingHours: hours.value() } : {}),
      };
    },
  };
}

/** What a job sends, by channel: a call's scenario, a LINE message, an email's subject and bodies, a text. */
function contentFields() {
  const scenario = h('input', { value: 'default' });
  const message = h('textarea', { rows: 3, placeholder: 'Hello {{name}}, …' });
  const subject = h('input', { maxlength: 998, placeholder: '{{名前}}様へのご案内' });
  const text = h('textarea', { rows: 5, placeholder: '{{名前}}様\n…' });
  const html = h('textarea', { rows: 5, placeholder: '<p>{{名前}}様</p>' });
  const sms = h('textarea', {
    rows: 3,
    maxlength: 1600,
    placeholder: '{{名前}}様、明日{{時間}}のご予約です。',
  });
  const scenarioField = field('Call scenario', 'scenarioId', scenario);
  const messageField = field('Message', 'message', message, 'Text with {{column}} placeholders');
  const emailField = h(
    'fieldset',
    { class: 'card-section' },
    h('legend', {}, 'Email'),
    field('Subject', 'email', subject, 'With {{column}} placeholders'),
    field('Text body', 'email-text', text, 'Plain text; a text body, an HTML body or both'),
    field('HTML body', 'email-html', html, 'Values filled in here are HTML-escaped'),
  );
  const smsField = field(
    'Text',
    'sms',
    sms,
    'With {{column}} placeholders; Japanese is 70 characters a part (67 once split), billed and paced by part',
  );
  return {
    scenarioField,
    /** The fields of what is sent, after the schedule. */
    sent: [messageField, emailField, smsField],
    /** Shows what each channel of the job (a fallback job's every channel) sends. */
    forChannels(channels: readonly string[]) {
      scenarioField.hidden = !channels.includes('call');
      messageField.hidden = !channels.includes('line');
      emailField.hidden = !channels.includes('email');
      smsField.hidden = !channels.includes('sms');
    },
    value(channels: readonly string[]): Record<string, unknown> {
      const of = (channel: string): Record<string, unknown> => {
        if (channel === 'call') return { scenarioId: scenario.value.trim() };
        if (channel === 'line') return { message: message.value };
        if (channel === 'sms') return { sms: { body: sms.value } };
        return {
          email: {
            subject: subject.value,
            ...(text.value ? { text: text.value } : {}),
            ...(html.value ? { html: html.value } : {}),
          },
        };
      };
      return Object.assign({}, ...channels.map(of));
    },
  };
}

/**
 * Template lists, as the ingest reads them (`shared/csv/headers.ts`): a phone column and a name for
 * a call list, a LINE user id for a message list; every other column is a `{{variable}}`. With a
 * BOM, so that Excel opens the Japanese headers as UTF-8.
 */
const TEMPLATES = {
  call: ['電話番号,名前,メモ', '090-1234-5678,山田太郎,初回のご案内', '+81 3-1234-5678,佐藤花子,'],
  line: ['userId,名前,クーポン', 'U0123456789abcdef0123456789abcdef,山田太郎,SPRING10'],
  email: ['メールアドレス,名前,クーポン', 'taro@example.com,山田太郎,SPRING10'],
  sms: ['携帯電話番号,名前,時間', '090-1234-5678,山田太郎,10時'],
  /** A fallback job's: each row's identifier for every channel it may try. */
  fallback: [
    'userId,メールアドレス,携帯電話番号,名前',
    'U0123456789abcdef0123456789abcdef,taro@example.com,090-1234-5678,山田太郎',
  ],
} as const;

/** "Download a template list", for the channels chosen now. */
function templateLink(channels: () => readonly string[]): HTMLAnchorElement {
  const link = h('a', { href: '#', class: 'template-link' }, 'Download a template list (CSV)');
  link.addEventListener('click', (event) => {
    event.preventDefault();
    const [channel = 'call', ...rest] = channels();
    const kind: keyof typeof TEMPLATES =
      rest.length > 0
        ? 'fallback'
        : Object.hasOwn(TEMPLATES, channel)
          ? (channel as keyof typeof TEMPLATES)
          : 'call';
    const blob = new Blob([`\uFEFF${TEMPLATES[kind].join('\r\n')}\r\n`], { type: 'text/csv;charset=utf-8' });
    const save = h('a', {
      href: URL.createObjectURL(blob),
      download: `switchboard-${kind}-list-template.csv`,
    });
    document.body.append(save);
    save.click();
    save.remove();
    setTimeout(() => URL.revokeObjectURL(save.href), 60_000);
  });
  return link;
}

/** The parts of the new job page that the upload and the ingest's answer write to. */
interface NewJobUi {
  readonly form: HTMLElement;
  readonly progress: HTMLProgressElement;
  readonly note: HTMLElement;
  readonly status: HTMLElement;
  readonly result: HTMLElement;
  readonly submit: HTMLButtonElement;
}

/** Creates the job, uploads its file to the presigned URL, then watches the ingest; false on a problem. */
async function createAndUpload(
  app: App,
  path: string,
  options: Record<string, unknown>,
  chosen: File,
  ui: NewJobUi,
): Promise<boolean> {
  const { form, progress, note, status } = ui;
  try {
    note.textContent = 'Creating the job…';
    const created = await app.api.json<{ jobId: string; upload?: { url: string } }>(
      'POST',
      `${path}/jobs`,
      options,
    );
    if (!created.upload) throw new Error('the API gave no upload URL');
    progress.hidden = false;
    await uploadFile(created.upload.url, chosen, (sent, total) => {
      progress.value = Math.round((sent / total) * 100);
      note.textContent = `Uploading… ${Math.round((sent / total) * 100)} %`;
    });
    note.textContent = 'Uploaded. Reading the list…';
    watchIngest(app, path, created.jobId, ui);
    return true;
  } catch (error) {
    note.textContent = '';
    if (error instanceof ApiError) showFieldErrors(form, error.fieldErrors);
    const unplaced = error instanceof ApiError ? status.textContent : '';
    status.textContent = `${(error as Error).message}${unplaced ? `: ${unplaced}` : ''}`;
    return false;
  }
}

/**
 * Waits for the ingest to decide, then shows what it read and the first rows it refused; a list it
 * refused whole (not a CSV, too large) has the API's reason at the file's field and under the form.
 */
function watchIngest(app: App, path: string, jobId: string, ui: NewJobUi): void {
  const { form, note, status: problem, result, submit } = ui;
  poll<JobView>({
    intervalMs: 1_000,
    read: () => app.api.json<JobView>('GET', `${path}/jobs/${jobId}`),
    onData: (job) => {
      if (job.status === 'uploading') return undefined;
      if (job.status === 'validating') {
        // The ingest records its counts as it goes: a large list shows its progress, not a still line.
        const { rows, tasks, rejected } = job.counts;
        note.textContent =
          rows === 0
            ? 'Uploaded. Reading the list…'
            : `Reading the list… ${formatNumber(rows)} rows read so far: ${formatNumber(tasks)} tasks, ${formatNumber(rejected)} rejected`;
        return undefined;
      }
      if (job.status === 'failed') {
        note.textContent = '';
        if (job.failureReason) showFieldErrors(form, { file: [job.failureReason] });
        problem.textContent = `The list was refused: ${job.failureReason ?? 'see the report'}`;
        // Another file may be chosen and sent: it makes a new job. What a refused list "held" is
        // nothing: the refusal is the whole answer.
        submit.disabled = false;
        replace(result);
        return true;
      }
      note.textContent = 'The list is read.';
      void showIngest(app, path, job, result).catch((error: Error) => {
        problem.textContent = error.message;
      });
      return true;
    },
    onState: ({ retrying, message }) => {
      if (retrying) note.textContent = `Cannot reach the API (${message}); retrying…`;
      else if (message) problem.textContent = message;
    },
  });
}

async function showIngest(app: App, path: string, job: JobView, result: HTMLElement): Promise<void> {
  const { counts } = job;
  const problems = await app.api.json<{ entries: RowProblem[]; more: boolean }>(
    'GET',
    `${path}/jobs/${job.jobId}/row-problems?limit=50`,
  );
  replace(
    result,
    h('h2', {}, 'What the list held'),
    countList([
      ['Rows', counts.rows],
      ['Tasks', counts.tasks],
      ['Rejected', counts.rejected],
      ['Skipped', counts.skipped],
    ]),
    problems.entries.length
      ? scrollable(
          { class: 'problems', 'aria-label': 'Rejected and skipped rows' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', {}, 'Row'),
              h('th', {}, 'Outcome'),
              h('th', {}, 'Column'),
              h('th', {}, 'Reason'),
              h('th', {}, 'Value'),
            ),
          ),
          h(
            'tbody',
            {},
            ...problems.entries.map((p) =>
              h(
                'tr',
                {},
                h('td', {}, String(p.row)),
                h('td', {}, p.outcome),
                h('td', {}, p.column ?? ''),
                h('td', {}, p.reason),
                h('td', {}, p.value ?? ''),
              ),
            ),
          ),
        )
      : h('p', {}, 'No row was rejected or skipped.'),
    problems.more ? h('p', {}, 'More rows were refused: the report lists them all.') : null,
    h(
      'p',
      {},
      h(
        'a',
        { class: 'button primary', href: `#/clients/${encodeURIComponent(job.clientId)}/jobs/${job.jobId}` },
        'Open the job',
      ),
    ),
  );
}
