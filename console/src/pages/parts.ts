/**
 * Pieces several pages show: the path back to a client, a row of counts, a table that scrolls on a
 * narrow screen, a file drop zone.
 */
import { type Child, formatNumber, h } from '../dom.ts';

/** `Clients / {client} / …` */
export function crumbs(clientId: string, ...tail: Child[]): HTMLElement {
  return h(
    'nav',
    { class: 'crumbs' },
    h('a', { href: '#/' }, 'Clients'),
    ' / ',
    h('a', { href: `#/clients/${encodeURIComponent(clientId)}` }, clientId),
    ' / ',
    ...tail,
  );
}

/** Labelled counts; each number carries `data-count` (its label in lower case) for tests and scripts. */
export function countList(counts: readonly (readonly [string, number])[]): HTMLElement {
  return h(
    'dl',
    { class: 'counts' },
    ...counts.flatMap(([label, n]) => [
      h('dt', {}, label),
      h('dd', { 'data-count': label.toLowerCase() }, formatNumber(n)),
    ]),
  );
}

/**
 * A table in a box that scrolls sideways when the screen is narrower than the table (a phone):
 * the page itself never does, and no column is cut off. `attrs` are the table's (its class, label).
 */
export function scrollable(attrs: Record<string, string>, ...children: Child[]): HTMLElement {
  return h('div', { class: 'table-scroll' }, h('table', attrs, ...children));
}

/**
 * A zone to drop a file on, which also opens `input`'s file chooser on a click, Enter or Space;
 * `chosen()` is the file dropped or chosen last.
 */
export function dropZone(input: HTMLInputElement): { element: HTMLElement; chosen(): File | undefined } {
  const idle = 'Drop a CSV file here, or choose one';
  const zone = h(
    'div',
    { class: 'drop', tabindex: 0, role: 'button', 'aria-label': `${idle} (Enter opens the chooser)` },
    idle,
  );
  let chosen: File | undefined;
  const choose = (f: File | undefined) => {
    chosen = f;
    zone.textContent = f ? `${f.name} (${formatNumber(f.size)} bytes)` : idle;
  };
  zone.addEventListener('click', () => input.click());
  zone.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' || e.key === ' ') input.click();
  });
  zone.addEventListener('dragover', (e) => {
    e.preventDefault();
    zone.classList.add('over');
  });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (e) => {
    e.preventDefault();
    zone.classList.remove('over');
    choose(e.dataTransfer?.files[0]);
  });
  input.addEventListener('change', () => choose(input.files?.[0]));
  return { element: zone, chosen: () => chosen };
}

/** An upload's rows that were not taken: row, reason and value, under `label`. */
export function problemsTable(
  label: string,
  problems: readonly { readonly row: number; readonly reason: string; readonly value?: string }[],
): HTMLElement | null {
  if (problems.length === 0) return null;
  return scrollable(
    { class: 'problems', 'aria-label': label },
    h('thead', {}, h('tr', {}, h('th', {}, 'Row'), h('th', {}, 'Reason'), h('th', {}, 'Value'))),
    h(
      'tbody',
      {},
      ...problems.map((p) =>
        h('tr', {}, h('td', {}, String(p.row)), h('td', {}, p.reason), h('td', {}, p.value ?? '')),
      ),
    ),
  );
}
