import { SwitchboardError } from '#shared/errors.ts';

/** The base of every error in LINE (its Messaging API and webhooks). */
export class LineError extends SwitchboardError {}
