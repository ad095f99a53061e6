/**
 * Lambda's event filtering, for the patterns Switchboard uses: a record matches a pattern when every
 * key of the pattern matches; a leaf is a list of allowed values, `{prefix}` or `{'anything-but'}`
 * rules. Filters of a mapping are ORed. The local stream poller applies the very patterns the CDK
 * app deploys (`shared/functions.ts`), so a record the deployed mapping drops is dropped here too.
 */

type Rule = string | number | boolean | { prefix: string } | { 'anything-but': readonly unknown[] };

function leafMatches(value: unknown, rules: readonly Rule[]): boolean {
  return rules.some((rule) => {
    if (typeof rule !== 'object' || rule === null) return value === rule;
    if ('prefix' in rule) return typeof value === 'string' && value.startsWith(rule.prefix);
    // anything-but: the value must be present and not listed.
    return value !== undefined && !rule['anything-but'].includes(value);
  });
}

/** Whether `record` matches `pattern`. */
export function matchesPattern(record: unknown, pattern: Record<string, unknown>): boolean {
  for (const [key, expected] of Object.entries(pattern)) {
    const value = (record as Record<string, unknown> | undefined)?.[key];
    if (Array.isArray(expected)) {
      if (!leafMatches(value, expected as Rule[])) return false;
    } else if (!matchesPattern(value, expected as Record<string, unknown>)) {
      return false;
    }
  }
  return true;
}

/** Whether `record` matches any of `filters` (none: every record). */
export function matchesAnyFilter(record: unknown, filters: readonly Record<string, unknown>[]): boolean {
  return filters.length === 0 || filters.some((f) => matchesPattern(record, f));
}
