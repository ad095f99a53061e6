/**
 * Retries by outcome as a form (`shared/jobs/retry-policy.ts`): for busy, no answer, voicemail and
 * failed, the attempts a task may make in all and the waits before each retry, in minutes
 * (`30, 60`: the last repeats). A schedule the form cannot show (linear, exponential) is said in
 * words and kept as it is unless its attempts are cleared. Errors land at each outcome's row
 * (`jobDefaults.retries.busy.delay`).
 */
import { field, h } from '../dom.ts';
import type { OutcomeRetry, RetryOutcome, RetryPolicy, RetrySchedule } from '../types.ts';

const OUTCOMES: readonly (readonly [RetryOutcome, string])[] = [
  ['busy', 'Busy'],
  ['no-answer', 'No answer'],
  ['voicemail', 'Voicemail'],
  ['failed', 'Failed'],
];

const minutes = (seconds: number) => String(Math.round((seconds / 60) * 100) / 100);

/** The waits as the form writes them, or undefined for a schedule it cannot (said in words instead). */
function waitsText(delay: RetrySchedule | undefined): string | undefined {
  if (!delay) return '';
  if (delay.kind === 'fixed') return minutes(delay.seconds);
  if (delay.kind === 'list') return delay.seconds.map(minutes).join(', ');
  return undefined;
}

function describe(delay: RetrySchedule): string {
  if (delay.kind === 'linear') return `from ${delay.seconds} s, ${delay.stepSeconds} s longer each time`;
  if (delay.kind === 'exponential') return `from ${delay.seconds} s, ×${delay.factor} each time`;
  return '';
}

/** One outcome's row: attempts and waits. */
function outcomeRow(prefix: string, outcome: RetryOutcome, label: string, initial: OutcomeRetry | undefined) {
  const attempts = h('input', {
    type: 'number',
    min: 1,
    max: 10,
    step: 1,
    value: initial ? String(initial.maxAttempts) : '',
  });
  const shown = waitsText(initial?.delay);
  const waits = h('input', {
    value: shown ?? describe(initial!.delay!),
    placeholder: 'e.g. 30, 60',
    disabled: shown === undefined,
  });
  const element = h(
    'div',
    { class: 'grid retry-row', 'data-field': `${prefix}.${outcome}` },
    field(`${label}: attempts in all`, `${prefix}.${outcome}.maxAttempts`, attempts, 'Empty: the job’s own'),
    field(
      `${label}: minutes before each retry`,
      `${prefix}.${outcome}.delay`,
      waits,
      shown === undefined ? 'Kept as set through the API' : 'The last one repeats',
    ),
  );
  const value = (): OutcomeRetry | undefined => {
    if (attempts.value === '') return undefined;
    const maxAttempts = Number(attempts.value);
    if (shown === undefined) return { maxAttempts, delay: initial!.delay! };
    const list = waits.value
      .split(/[,\s、]+/)
      .filter(Boolean)
      .map((m) => Math.round(Number(m) * 60));
    if (list.length === 0) return { maxAttempts };
    // The kind the settings had, so that an unchanged form saves what it read.
    const delay: RetrySchedule =
      list.length === 1 && initial?.delay?.kind !== 'list'
        ? { kind: 'fixed', seconds: list[0]! }
        : { kind: 'list', seconds: list };
    return { maxAttempts, delay };
  };
  return { element, value };
}

/** The form for a policy named `prefix` in the API (`jobDefaults.retries`). */
export function retriesEditor(prefix: string, initial: RetryPolicy | undefined) {
  const rows = OUTCOMES.map(([outcome, label]) => ({
    outcome,
    ...outcomeRow(prefix, outcome, label, initial?.[outcome]),
  }));
  const element = h(
    'fieldset',
    { class: 'retries', 'data-field': prefix },
    h('legend', {}, 'Retries by outcome'),
    h(
      'p',
      { class: 'hint' },
      'Per way a call can end without a conversation. An outcome left empty retries as the job says (failed: not at all).',
    ),
    ...rows.map((row) => row.element),
    h('p', { class: 'field-error', role: 'alert' }),
  );
  const value = (): RetryPolicy | undefined => {
    const policy: Partial<Record<RetryOutcome, OutcomeRetry>> = {};
    for (const row of rows) {
      const retry = row.value();
      if (retry) policy[row.outcome] = retry;
    }
    return Object.keys(policy).length > 0 ? policy : undefined;
  };
  return { element, value };
}
