/**
 * The console's calls to `/console/api` (the operator API behind the JWT authorizer), with the
 * signed-in user's access token. A problem is an {@link ApiError} carrying the API's message and
 * `fieldErrors`; a 401 signs the user out.
 */
import type { Session } from './auth.ts';

export const API = '/console/api';

export class ApiError extends Error {
  override name = 'ApiError';
  readonly status: number;
  readonly fieldErrors: Readonly<Record<string, readonly string[]>>;
  constructor(
    status: number,
    message: string,
    fieldErrors: Readonly<Record<string, readonly string[]>> = {},
  ) {
    super(message);
    this.status = status;
    this.fieldErrors = fieldErrors;
  }
}

/** A network error or a 5xx: worth trying again. */
export function isTransient(error: unknown): boolean {
  return !(error instanceof ApiError) || error.status >= 500 || error.status === 429;
}

export class Api {
  readonly #session: Session;
  readonly #onSignedOut: () => void;

  constructor(session: Session, onSignedOut: () => void) {
    this.#session = session;
    this.#onSignedOut = onSignedOut;
  }

  async json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const response = await this.fetch(method, path, {
      ...(body === undefined
        ? {}
        : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
    });
    return (await response.json()) as T;
  }

  /** A request to the API; any answer but 2xx (and 303 followed) is an {@link ApiError}. */
  async fetch(method: string, path: string, init: RequestInit = {}): Promise<Response> {
    const token = await this.#session.accessToken();
    if (!token) {
      this.#onSignedOut();
      throw new ApiError(401, 'You are signed out.');
    }
    const response = await fetch(`${API}${path}`, {
      ...init,
      method,
      headers: { ...(init.headers as Record<string, string> | undefined), authorization: `Bearer ${token}` },
    });
    if (response.ok) return response;
    let message = `${response.status} ${response.statusText}`;
    let fieldErrors: Record<string, string[]> = {};
    try {
      const body = (await response.json()) as { message?: string; fieldErrors?: Record<string, string[]> };
      if (body.message) message = body.message;
      fieldErrors = body.fieldErrors ?? {};
    } catch {
      // not JSON: the status says it
    }
    if (response.status === 401) {
      this.#session.signOut();
      this.#onSignedOut();
    }
    throw new ApiError(response.status, message, fieldErrors);
  }
}

/**
 * PUTs a file to a presigned S3 URL, telling `onProgress` the bytes sent (fetch cannot report an
 * upload's progress; XMLHttpRequest can).
 */
export function uploadFile(
  url: string,
  file: Blob,
  onProgress: (sent: number, total: number) => void,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', url);
    xhr.upload.onprogress = (event) => onProgress(event.loaded, event.total || file.size);
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) resolve();
      else {
        const code = /<Code>([^<]+)<\/Code>/.exec(xhr.responseText)?.[1];
        const text = /<Message>([^<]+)<\/Message>/.exec(xhr.responseText)?.[1];
        reject(
          new ApiError(
            xhr.status,
            `the upload was refused: ${code ?? xhr.status}${text ? ` (${text})` : ''}`,
          ),
        );
      }
    };
    xhr.onerror = () => reject(new Error('the upload could not reach storage (network error)'));
    xhr.send(file);
  });
}
