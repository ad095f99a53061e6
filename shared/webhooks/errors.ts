import { SwitchboardError } from '#shared/errors.ts';

/** The base of every error in receiving webhooks. */
export class WebhookError extends SwitchboardError {}
