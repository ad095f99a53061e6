import { SwitchboardError } from '#shared/errors.ts';

/** The base of every error in outcome webhooks (delivering a task's outcome to a client). */
export class OutcomeError extends SwitchboardError {}
