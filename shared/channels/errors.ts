import { SwitchboardError } from '#shared/errors.ts';

/** The base of every error in the LINE channels API. */
export class ChannelError extends SwitchboardError {}
