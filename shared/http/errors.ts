import { SwitchboardError } from '#shared/errors.ts';

/** The base of every error in the HTTP transports (API Gateway requests and answers). */
export class HttpError extends SwitchboardError {}
