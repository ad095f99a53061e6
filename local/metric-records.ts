/**
 * CloudWatch embedded-metric-format records in a process's output: on AWS the log agent turns
 * them into metrics; the local stack keeps them out of `npm start`'s progress lines.
 */

/** A JSON object whose `_aws.CloudWatchMetrics` is a list (the EMF specification's marker). */
export function isMetricRecord(line: string): boolean {
  if (!line.startsWith('{') || !line.includes('"CloudWatchMetrics"')) return false;
  try {
    const record = JSON.parse(line) as { _aws?: { CloudWatchMetrics?: unknown } };
    return Array.isArray(record._aws?.CloudWatchMetrics);
  } catch {
    return false;
  }
}
