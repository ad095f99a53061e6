/**
 * Calling hours per weekday, edited as each day's windows (start, end), added and removed by
 * buttons: the client's hours on its settings, a job's own on the new job page. A window may end at
 * 24:00, and one whose end is not after its start runs into the next day
 * (`shared/pacing/calling-hours.ts`).
 */
import { h } from '../dom.ts';
import { type CallingHours, type CallingWindow, WEEKDAYS, type Weekday } from '../types.ts';

const DAY_NAMES: Record<Weekday, string> = {
  mon: 'Monday',
  tue: 'Tuesday',
  wed: 'Wednesday',
  thu: 'Thursday',
  fri: 'Friday',
  sat: 'Saturday',
  sun: 'Sunday',
};

/** Calling hours per weekday: each day a list of windows (start, end), added and removed by buttons. */
export function callingHoursEditor(
  initial: CallingHours['weekly'],
  legend = 'Calling hours (in the time zone above)',
) {
  const days = new Map<Weekday, HTMLElement>();
  const fieldset = h('fieldset', { class: 'hours', 'data-field': 'callingHours' }, h('legend', {}, legend));
  for (const day of WEEKDAYS) {
    const windows = h('span', { class: 'windows' }, ...(initial[day] ?? []).map((w) => windowRow(day, w)));
    days.set(day, windows);
    fieldset.append(dayRow(day, windows));
  }
  fieldset.append(h('p', { class: 'field-error', role: 'alert' }));
  return {
    element: fieldset,
    /** The windows per day; a closed day is left out, unless the settings read named it (as `[]`). */
    value: () =>
      Object.fromEntries(
        WEEKDAYS.map((day) => [
          day,
          [...days.get(day)!.querySelectorAll('.window')].map((row) => {
            const [start, end] = row.querySelectorAll('input');
            return { start: start!.value, end: end!.value };
          }),
        ]).filter(([day, windows]) => windows!.length > 0 || initial[day as Weekday] !== undefined),
      ),
  };
}

/** One weekday: its name, its windows, a button that adds one, and the place for its error. */
function dayRow(day: Weekday, windows: HTMLElement): HTMLDivElement {
  return h(
    'div',
    { class: 'day', 'data-field': `callingHours.${day}` },
    h('span', { class: 'day-name' }, DAY_NAMES[day]),
    windows,
    h(
      'button',
      {
        type: 'button',
        class: 'small',
        'aria-label': `Add a ${DAY_NAMES[day]} window`,
        onclick: () => windows.append(windowRow(day, { start: '09:00', end: '18:00' })),
      },
      '+ window',
    ),
    h('p', { class: 'field-error', role: 'alert' }),
  );
}

/** One window of a day: its start and end, and a button that removes it. */
function windowRow(day: Weekday, w: CallingWindow): HTMLSpanElement {
  const start = timeInput(w.start, `${DAY_NAMES[day]} from`);
  const end = timeInput(w.end, `${DAY_NAMES[day]} until`);
  const row = h('span', { class: 'window' }, start, '–', end);
  row.append(
    h(
      'button',
      {
        type: 'button',
        class: 'small',
        'aria-label': `Remove this ${DAY_NAMES[day]} window`,
        onclick: () => row.remove(),
      },
      '×',
    ),
  );
  return row;
}

/** Text, not type=time: a window may end at 24:00, which a time input cannot hold. */
function timeInput(value: string, label: string): HTMLInputElement {
  return h('input', {
    value,
    required: true,
    size: 5,
    placeholder: 'HH:MM',
    pattern: '([01][0-9]|2[0-3]):[0-5][0-9]|24:00',
    'aria-label': label,
  });
}
