import { SwitchboardError } from '#shared/errors.ts';

/** The base of every error in telephony (providers, their callbacks and events). */
export class TelephonyError extends SwitchboardError {}
