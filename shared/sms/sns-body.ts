/**
 * What End User Messaging SMS published to SNS, out of the SQS message that carried it: the JSON
 * record itself (raw message delivery) or the SNS notification envelope holding it in `Message`
 * (raw delivery off). Pure; never throws: a body of no use is the reason, as a string.
 */
export function snsPayload(body: unknown): Record<string, unknown> | string {
  let value = body;
  // A string, its envelope, the envelope's Message string, the record: four steps at most.
  for (let step = 0; step < 4; step++) {
    if (typeof value === 'string') {
      if (value.length > 64 * 1024) return 'a body over 64 KB';
      try {
        value = JSON.parse(value);
      } catch {
        return 'not JSON';
      }
      continue;
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'not an object';
    const object = value as Record<string, unknown>;
    if (object.Type === 'Notification' && typeof object.Message === 'string') {
      value = object.Message;
      continue;
    }
    return object;
  }
  return 'nested too deep';
}
