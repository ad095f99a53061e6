import { SwitchboardError } from '#shared/errors.ts';

/** The base of every error in leases. */
export class LeaseError extends SwitchboardError {}
