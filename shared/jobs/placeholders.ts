/**
 * The `{{placeholders}}` a message job's content fills from its list's columns, and which of them
 * a list's header cannot fill: the job then fails when its header is read, with one reason, instead
 * of every task failing `missing-variable` as it is sent.
 */
import { compileTemplate } from '#shared/campaign/template.ts';
import { isNameHeader } from '#shared/csv/headers.ts';
import { emailTemplateVariables } from '#shared/email/template.ts';
import { smsTemplateVariables } from '#shared/sms/template.ts';
import type { Job } from './model.ts';

/** The names a job's message, email or text uses, in order of first use; none for a call job. */
export function contentPlaceholders(job: Pick<Job, 'channel' | 'message' | 'email' | 'sms'>): string[] {
  if (job.channel === 'line' && job.message) return [...compileTemplate(job.message).variables];
  if (job.channel === 'email' && job.email) return [...emailTemplateVariables(job.email)];
  if (job.channel === 'sms' && job.sms) return smsTemplateVariables(job.sms);
  return [];
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
