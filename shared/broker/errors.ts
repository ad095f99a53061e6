import { SwitchboardError } from '#shared/errors.ts';

/** The base of every error in the call and message broker (and the worker that hosts it). */
export class BrokerError extends SwitchboardError {}
