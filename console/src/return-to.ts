/**
 * Where an operator was when they had to sign in: the page their session expired on, or a link
 * they opened while signed out. The sign-in page says why and goes back there (this tab only:
 * sessionStorage, as the tokens are).
 */
const KEY = 'switchboard.returnTo';

export interface Place {
  /** The page's hash (`#/clients/acme/jobs/01J…`). */
  readonly hash: string;
  /** `expired`: the session ended under the page; `link`: opened while signed out. */
  readonly why: 'expired' | 'link';
}

/** Pages there is no point in going back to. */
const NOWHERE = new Set(['', '#', '#/', '#/signin']);

export function rememberPlace(place: Place): void {
  if (!NOWHERE.has(place.hash)) sessionStorage.setItem(KEY, JSON.stringify(place));
}

/** The place remembered, else the page the browser shows now when it is one worth going back to. */
export function placeToReturnTo(currentHash: string): Place | undefined {
  const stored = sessionStorage.getItem(KEY);
  if (stored) return JSON.parse(stored) as Place;
  return NOWHERE.has(currentHash) ? undefined : { hash: currentHash, why: 'link' };
}

export function forgetPlace(): void {
  sessionStorage.removeItem(KEY);
}
