/** A few lines of DOM building: `h('button', { onclick }, 'Pause')`. No framework needed. */

export type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, unknown>;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      element.addEventListener(name.slice(2), value as EventListener);
    } else if (name === 'style' && typeof value === 'object') {
      // Through CSSOM: the page's content security policy refuses inline style attributes.
      Object.assign(element.style, value);
    } else if (name === 'value' && 'value' in element) {
      (element as HTMLInputElement).value = String(value);
    } else {
      element.setAttribute(name, value === true ? '' : String(value));
    }
  }
  append(element, children);
  return element;
}

export function append(parent: Node, children: readonly Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}

/** Replaces everything inside `parent`. */
export function replace(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  append(parent, children);
}

/** A labelled input, with the place for its field error under it (`data-field` names the API field). */
export function field(
  label: string,
  name: string,
  input: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement,
  hint?: string,
): HTMLDivElement {
  const id = `f-${name.replace(/[^a-z0-9]+/gi, '-')}`;
  input.id = id;
  input.name = name;
  const error = h('p', { class: 'field-error', id: `${id}-error`, role: 'alert' });
  input.setAttribute('aria-describedby', `${id}-error`);
  return h(
    'div',
    { class: 'field', 'data-field': name },
    h('label', { for: id }, label),
    input,
    hint ? h('p', { class: 'hint' }, hint) : null,
    error,
  );
}

/**
 * Shows the API's `fieldErrors` at their fields in `form` (a field named `callingHours.mon` also
 * catches `callingHours.mon[0].start`); errors for no field shown go to the form's summary.
 */
export function showFieldErrors(
  form: HTMLElement,
  fieldErrors: Readonly<Record<string, readonly string[]>>,
): void {
  for (const error of form.querySelectorAll('.field-error')) error.textContent = '';
  for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
  const unplaced: string[] = [];
  const fields = [...form.querySelectorAll<HTMLElement>('[data-field]')];
  for (const [path, messages] of Object.entries(fieldErrors)) {
    const target = fields
      .filter(
        (f) =>
          path === f.dataset.field ||
          path.startsWith(`${f.dataset.field}.`) ||
          path.startsWith(`${f.dataset.field}[`),
      )
      .sort((a, b) => (b.dataset.field?.length ?? 0) - (a.dataset.field?.length ?? 0))[0];
    const text = `${path}: ${messages.join('; ')}`;
    const slot = target?.querySelector('.field-error');
    if (target && slot) {
      slot.textContent = slot.textContent ? `${slot.textContent} ${text}` : text;
      target.querySelector('input, select, textarea')?.setAttribute('aria-invalid', 'true');
    } else unplaced.push(text);
  }
  const summary = form.querySelector('.form-errors');
  if (summary) summary.textContent = unplaced.join(' ');
}

export function formatNumber(n: number): string {
  return new Intl.NumberFormat('en-US').format(n);
}

export function formatTime(iso: string | undefined): string {
  if (!iso) return '';
  return new Date(iso).toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'medium' });
}
