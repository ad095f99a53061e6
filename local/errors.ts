import { SwitchboardError } from '#shared/errors.ts';

/**
 * The base of every error the local cloud throws: its emulators' refusals (which answer as AWS
 * would), its start-up failures and its options.
 */
export class LocalCloudError extends SwitchboardError {}
