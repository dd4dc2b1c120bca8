// The Slurm job this JupyterLab itself runs inside (Open OnDemand's Jupyter app, JupyterHub with
// batchspawner): the server lists it with `own: true` (API.md, Item). Its row is marked "this
// notebook", explains itself in a tooltip, opens no panel and never has a Cancel button
// (state.ts actionsOf): cancelling it would stop this JupyterLab and every kernel in it.
// Text only: the note is set with textContent/title, never as HTML.

import type { Item } from './state';

/** The mark's text, as the server's `size` of the row says it. */
export const OWN_LABEL = 'this notebook';

/** The tooltip when the server sent no `own_note` (an older server never marks a row). */
export const OWN_NOTE =
  'This JupyterLab runs inside this Slurm job. It has no Cancel: that would stop this notebook ' +
  'and its kernels. End it from the portal that started it, or with scancel in a terminal.';

/** Whether `item` is the job this JupyterLab runs inside (only a literal `true` counts). */
export function isOwn(item: Item | undefined): boolean {
  return item?.own === true;
}

/** The tooltip of the own row. */
export function ownNote(item: Item): string {
  return item.own_note ? item.own_note : OWN_NOTE;
}

/**
 * Marks a drawn row as the notebook's own: a "this notebook" tag after the name (`line`), the
 * note as the row's tooltip, `data-own` for styles and tests. Other rows are left as they are
 * (a reused node loses a stale mark).
 */
export function markOwnRow(node: HTMLElement, line: HTMLElement, item: Item): void {
  if (!isOwn(item)) {
    delete node.dataset.own;
    return;
  }
  node.dataset.own = '1';
  node.title = ownNote(item);
  const mark = document.createElement('span');
  mark.className = 'jt-side-own';
  mark.textContent = OWN_LABEL;
  mark.title = ownNote(item);
  line.append(mark);
}
