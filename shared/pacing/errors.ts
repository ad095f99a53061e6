import { SwitchboardError } from '#shared/errors.ts';

/** The base of every error in pacing (calling hours, contracts). */
export class PacingError extends SwitchboardError {}
