/**
 * Problems of an operator's input gathered by field path (`callingHours.mon[0].start`), so a form
 * can show each next to its field (`validation.ts`).
 */
import type { z } from 'zod';
import { type CallingHours, callingHoursSchema, WEEKDAYS } from '#shared/pacing/calling-hours.ts';

/**
 * Calling hours (`weekly` windows in `timeZone`) read by the calling-hours schema; each problem is
 * added under `field` (a day that is not a weekday named as such). Undefined when any was found.
 */
export function parseHours(
  errors: Record<string, string[]>,
  timeZone: unknown,
  weekly: unknown,
  field: string,
): CallingHours | undefined {
  const result = callingHoursSchema.safeParse({ timeZone, weekly });
  if (result.success) return result.data;
  for (const issue of result.error.issues) {
    const [head, ...rest] = issue.path;
    // The settings' `callingHours` is the schema's `weekly`; its zone is the settings' `timeZone`.
    const path = head === 'weekly' ? [field, ...rest] : issue.path;
    if (head === 'weekly' && rest.length === 0 && typeof weekly === 'object' && weekly !== null) {
      const unknown = Object.keys(weekly).filter((k) => !(WEEKDAYS as readonly string[]).includes(k));
      if (unknown.length > 0) {
        for (const day of unknown) add(errors, `${field}.${day}`, 'is not a weekday (mon … sun)');
        continue;
      }
    }
    add(errors, formatPath(path), issue.message);
  }
  return undefined;
}

/** Adds zod's issues by field path; an unknown field is named as one. */
export function collect(errors: Record<string, string[]>, issues: readonly z.core.$ZodIssue[]): void {
  for (const issue of issues) {
    // `callingHours` and `timeZone` are checked as a whole by the calling-hours schema.
    if (issue.path[0] === 'callingHours' && issue.path.length > 1) continue;
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) add(errors, formatPath([...issue.path, key]), 'is not a known field');
      continue;
    }
    add(errors, formatPath(issue.path) || '(body)', issue.message);
  }
}

/** Adds one problem under a field path, once. */
export function add(errors: Record<string, string[]>, path: string, message: string): void {
  const list = errors[path] ?? [];
  if (!list.includes(message)) list.push(message);
  errors[path] = list;
}

function formatPath(path: readonly PropertyKey[]): string {
  return path
    .map((part, i) => (typeof part === 'number' ? `[${part}]` : `${i === 0 ? '' : '.'}${String(part)}`))
    .join('');
}
