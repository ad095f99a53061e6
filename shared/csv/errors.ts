import { SwitchboardError } from '#shared/errors.ts';

/** The base of every error in reading recipient lists (CSV). */
export class CsvError extends SwitchboardError {}
