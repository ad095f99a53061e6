/**
 * A recipient's time zone (issue 14 #4): from the list's `timezone` / `タイムゾーン` cell when it has
 * one, else from the number: libphonenumber gives its region (country), `countries-and-timezones`
 * (the IANA tz database's zone.tab) the country's zones. A country with one zone gives it; one that
 * spans several (US, Canada, Russia, Australia, Brazil…) gives the client's zone when the client
 * is in that country, and otherwise the client's zone too: a number alone cannot say which of
 * several zones a person lives in, and the client's zone is the one its hours were written for.
 */
import ct from 'countries-and-timezones';
import { parsePhoneNumberFromString } from 'libphonenumber-js/max';
import { type CallingHours, isAbbreviationOrOffset, isTimeZone } from './calling-hours.ts';

export { isTimeZone };

/** The zone of a country (ISO 3166-1 alpha-2) when it has exactly one, else `fallback`. */
export function regionZone(region: string | undefined, fallback: string): string {
  if (!region) return fallback;
  const zones = ct.getCountry(region)?.timezones ?? [];
  if (zones.length === 1 && isTimeZone(zones[0]!)) return zones[0]!;
  return fallback;
}

/** The zone of an E.164 number (its country's single zone), else `fallback` (the client's zone). */
export function recipientZone(e164: string, fallback: string): string {
  const phone = parsePhoneNumberFromString(e164);
  return regionZone(phone?.country, fallback);
}

/** The time-zone cell of a list row: a known IANA zone (in its canonical spelling), or why not. */
export function checkTimeZoneCell(
  cell: string,
): { readonly ok: true; readonly timeZone: string } | { readonly ok: false; readonly reason: string } {
  const zone = cell.trim();
  if (isAbbreviationOrOffset(zone)) {
    return {
      ok: false,
      reason:
        'an abbreviation or offset, not a place: write the IANA zone (such as America/New_York or Asia/Tokyo), which says when daylight saving applies',
    };
  }
  if (zone !== '' && isTimeZone(zone)) {
    return {
      ok: true,
      timeZone: new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone,
    };
  }
  return { ok: false, reason: 'not an IANA time zone (such as Asia/Tokyo or America/New_York)' };
}

const moved = new WeakMap<CallingHours, Map<string, CallingHours>>();

/**
 * The same weekly hours read in another zone (09:00–18:00 where the recipient is); the same
 * object for the same hours and zone, so the compiled hours stay cached.
 */
export function hoursInZone(hours: CallingHours, timeZone: string): CallingHours {
  if (hours.timeZone === timeZone) return hours;
  let byZone = moved.get(hours);
  if (!byZone) {
    byZone = new Map();
    moved.set(hours, byZone);
  }
  let result = byZone.get(timeZone);
  if (!result) {
    result = { timeZone, weekly: hours.weekly };
    byZone.set(timeZone, result);
  }
  return result;
}
