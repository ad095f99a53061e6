import { SwitchboardError } from '#shared/errors.ts';

/** The base of every error in the broker fleet and the job manager that runs it. */
export class FleetError extends SwitchboardError {}
