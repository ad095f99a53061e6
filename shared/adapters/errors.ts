import { SwitchboardError } from '#shared/errors.ts';

/** The base of every error in the adapters to AWS services (stores, queues, ECS, secrets). */
export class AdapterError extends SwitchboardError {}
