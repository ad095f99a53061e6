/**
 * What the signed-in user's role in a client lets the console offer. The API decides (each route's
 * role in `shared/routes.ts`); the console only hides what would be refused, so that a viewer is
 * not shown a Save or a Cancel that answers 403.
 */
import { type ClientRole, mayActFor } from '#shared/operators/tenancy.ts';
import type { App } from './app.ts';

export type { ClientRole };

/** Whether the user may do what `needed` allows in `clientId` (false until known, or when unknown). */
export async function mayDo(app: App, clientId: string, needed: ClientRole): Promise<boolean> {
  try {
    return mayActFor(await app.me(), clientId, needed);
  } catch {
    return false;
  }
}

/** Hides `elements` until the user's role in `clientId` is known to allow `needed`. */
export function shownFor(app: App, clientId: string, needed: ClientRole, ...elements: HTMLElement[]): void {
  for (const element of elements) element.hidden = true;
  void mayDo(app, clientId, needed).then((may) => {
    for (const element of elements) element.hidden = !may;
  });
}

/**
 * Makes `form` read-only unless the user's role in `clientId` allows `needed`: its fields disabled,
 * its buttons (Save, "+ window", "×") hidden, a note saying why. A control with a `data-role` of
 * its own (a Pause in the settings' actions) is left to {@link shownFor}.
 */
export function editableFor(
  app: App,
  clientId: string,
  needed: ClientRole,
  form: HTMLFormElement,
  note: HTMLElement,
): void {
  const fields = [...form.querySelectorAll<HTMLInputElement>('input:not([data-role]), select, textarea')];
  const buttons = [...form.querySelectorAll<HTMLButtonElement>('button:not([data-role])')];
  const allow = (may: boolean) => {
    for (const input of fields) input.disabled = !may;
    for (const button of buttons) button.hidden = !may;
  };
  allow(false);
  note.hidden = true;
  void mayDo(app, clientId, needed).then((may) => {
    allow(may);
    note.hidden = may;
    note.textContent = may ? '' : `Read only: changing these needs the ${needed} role in this client.`;
  });
}
