/** What every page gets: the API, the session, navigation, and the page's own teardown. */
import type { Api } from './api.ts';
import type { Session } from './auth.ts';
import type { Operator } from './types.ts';

export interface App {
  readonly api: Api;
  readonly session: Session;
  go(hash: string): void;
  /** The signed-in user (read once per sign-in). */
  me(): Promise<Operator>;
}

export interface Page {
  readonly title: string;
  readonly element: HTMLElement;
  /** Stops what the page started (polling) when another page is shown. */
  dispose?(): void;
}
