import { SwitchboardError } from '#shared/errors.ts';

/** The base of every error in SMS. */
export class SmsError extends SwitchboardError {}
