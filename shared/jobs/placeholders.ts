/**
 * The `{{placeholders}}` a message job's content fills from its list's columns, and which of them
 * a list's header cannot fill: the job then fails when its header is read, with one reason, instead
 * of every task failing `missing-variable` as it is sent.
 */
import { compileTemplate } from '#shared/campaign/template.ts';
import { isNameHeader } from '#shared/csv/headers.ts';
import { emailTemplateVariables } from '#shared/email/template.ts';
import { smsTemplateVariables } from '#shared/sms/template.ts';
import { channelsOf, type Job } from './model.ts';

/** The names a job's message, email or text uses (every channel it may fall back to), in order of first use; none for a call job. */
export function contentPlaceholders(
  job: Pick<Job, 'channel' | 'fallback' | 'message' | 'email' | 'sms'>,
): string[] {
  const found = new Set<string>();
  for (const channel of channelsOf(job)) {
    if (channel === 'line' && job.message)
      for (const v of compileTemplate(job.message).variables) found.add(v);
    if (channel === 'email' && job.email) for (const v of emailTemplateVariables(job.email)) found.add(v);
    if (channel === 'sms' && job.sms) for (const v of smsTemplateVariables(job.sms)) found.add(v);
  }
  return [...found];
}

/**
 * Of `placeholders`, those no row of a list with this header can fill: not a column kept as a
 * variable (`variables`' keys), nor the name (`name`, or the name column's header as written, when
 * the list has a name column).
 */
export function unfilledPlaceholders(
  placeholders: readonly string[],
  header: { readonly variables: readonly string[]; readonly hasName: boolean },
): string[] {
  const columns = new Set(header.variables);
  return placeholders.filter(
    (name) => !columns.has(name) && !(header.hasName && (name === 'name' || isNameHeader(name))),
  );
}
