/**
 * What a failed send through an AWS SDK client means: first the service's own rules, which each
 * transport gives as data (`ServiceFailureRules`: `SES_FAILURES`, `SMS_FAILURES`), then the
 * generic ones: a client fault (4xx) is final; a server fault, a timeout or a dropped connection
 * leaves the request in doubt, unless the connection was never made.
 */
import type { TransportOutcome } from '#shared/campaign/transport.ts';

/** Errors whose request never reached the service: sending again cannot send twice. */
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

/** A service exception of the SDK, or the connection's error, as far as a classifier reads it. */
export interface SdkFailure {
  /** The exception's name (`ThrottlingException`) or the error's. */
  readonly name: string | undefined;
  /** `Name: message`, for the operator. */
  readonly message: string;
  /** The service's reason code (`Reason` of End User Messaging's exceptions), when it gave one. */
  readonly reasonCode: string | undefined;
  readonly status: number | undefined;
  readonly requestId: string | undefined;
  readonly fault: 'client' | 'server' | undefined;
  /** The socket's code (`ECONNREFUSED`), when the request failed below HTTP. */
  readonly code: string | undefined;
}

export function sdkFailure(error: unknown): SdkFailure {
  const e = error as {
    name?: string;
    message?: string;
    code?: string;
    Reason?: unknown;
    $fault?: 'client' | 'server';
    $metadata?: { httpStatusCode?: number; requestId?: string };
  };
  return {
    name: e.name,
    message: `${e.name ?? 'Error'}: ${e.message ?? ''}`,
    reasonCode: typeof e.Reason === 'string' ? e.Reason : undefined,
    status: e.$metadata?.httpStatusCode,
    requestId: e.$metadata?.requestId,
    fault: e.$fault,
    code: e.code,
  };
}

/** The outcome of a failure no service rule named (see the module comment). */
export function genericSendFailure(f: SdkFailure): TransportOutcome {
  const { status, requestId, message } = f;
  if (status !== undefined && status >= 400 && status < 500 && f.fault === 'client')
    return { kind: 'rejected', status, message, details: [], requestId };
  const never = f.code !== undefined && NOT_SENT_CODES.has(f.code);
  return {
    kind: 'retryable',
    reason: status !== undefined ? 'server-error' : f.name === 'TimeoutError' ? 'timeout' : 'network',
    maybeDelivered: !never,
    status,
    message,
    requestId,
  };
}

/**
 * What a service's own exceptions mean, named by the transport before the generic rules: one
 * mapping per transport (`SES_FAILURES`, `SMS_FAILURES`), as data.
 */
export interface ServiceFailureRules {
  /** The exception of too many requests: nothing was sent, the lane backs off. */
  readonly rateLimited: string;
  /** The exception of a used-up quota (when `applies`), which quota, and what the operator reads before the message. */
  readonly quotaUsedUp: {
    readonly name: string;
    readonly quota: 'daily' | 'monthly';
    readonly what: string;
    readonly applies?: (f: SdkFailure) => boolean;
  };
  /** The exceptions of an account that sends nothing, and what the operator reads before the message. */
  readonly held: { readonly names: readonly string[]; readonly what: string };
  /** A last rule of the service's own, before the generic ones (undefined: none applies). */
  readonly other?: (f: SdkFailure) => TransportOutcome | undefined;
}

/** A failed send (an SDK service exception, or the connection's error): the service's rules, then the generic ones. */
export function classifySendFailure(error: unknown, rules: ServiceFailureRules): TransportOutcome {
  const f = sdkFailure(error);
  const { message, requestId } = f;
  if (f.name === rules.rateLimited)
    return { kind: 'rate-limited', retryAfterMs: undefined, message, requestId };
  const quota = rules.quotaUsedUp;
  if (f.name === quota.name && (quota.applies?.(f) ?? true))
    return { kind: 'quota-used-up', quota: quota.quota, message: `${quota.what}: ${message}`, requestId };
  if (f.name !== undefined && rules.held.names.includes(f.name))
    return { kind: 'held', reason: `${rules.held.what}: ${message}`, requestId };
  return rules.other?.(f) ?? genericSendFailure(f);
}
