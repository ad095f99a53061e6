import { SwitchboardError } from '#shared/errors.ts';

/** The base of every error in the message campaign pipeline (templates, transports, outcome reports). */
export class CampaignError extends SwitchboardError {}
