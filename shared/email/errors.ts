import { SwitchboardError } from '#shared/errors.ts';

/** The base of every error in email. */
export class EmailError extends SwitchboardError {}
