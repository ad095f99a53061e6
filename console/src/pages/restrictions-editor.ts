/**
 * The client's restricted periods and holidays in its settings form: one period a line
 * (`2026-12-29..2027-01-03 year-end`, `2026-11-20T12:00..2026-11-20T13:00`, or a lone date), and
 * the country whose public holidays close the client. The API checks them and names each problem
 * (`restrictedPeriods[1].end`); this only turns the lines into its shape.
 */
import { field, h } from '../dom.ts';
import type { ClientSettings, RestrictedPeriod } from '../types.ts';

const LINE = /^(\S+?)(?:\.\.(\S+))?(?:\s+(.+))?$/;

export function periodLine(p: RestrictedPeriod): string {
  return `${p.start}${p.end ? `..${p.end}` : ''}${p.name ? ` ${p.name}` : ''}`;
}

/** The lines as periods; a line that does not even split is sent as its start, for the API to name. */
export function parsePeriodLines(text: string): RestrictedPeriod[] {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .map((line) => {
      const [, start = line, end, name] = LINE.exec(line) ?? [];
      return { start, ...(end ? { end } : {}), ...(name ? { name: name.trim() } : {}) };
    });
}

export function restrictionsEditor(client: ClientSettings) {
  const periods = h('textarea', { rows: 3 }) as HTMLTextAreaElement;
  periods.value = (client.restrictedPeriods ?? []).map(periodLine).join('\n');
  const holidays = h('input', {
    pattern: '[A-Za-z]{2}',
    maxlength: 2,
    value: client.holidays?.country ?? '',
  }) as HTMLInputElement;
  return {
    elements: [
      field(
        'Restricted periods (nothing starts)',
        'restrictedPeriods',
        periods,
        'One a line, in the client zone: 2026-12-29..2027-01-03 year-end (end date included), or 2026-11-20T12:00..2026-11-20T13:00',
      ),
      field(
        'Public holidays of',
        'holidays.country',
        holidays,
        'A country code such as JP: no call or message on its public holidays; empty for none',
      ),
    ],
    value(): Pick<ClientSettings, 'restrictedPeriods' | 'holidays'> {
      const list = parsePeriodLines(periods.value);
      const country = holidays.value.trim().toUpperCase();
      return {
        ...(list.length > 0 ? { restrictedPeriods: list } : {}),
        ...(country ? { holidays: { country } } : {}),
      };
    },
  };
}
