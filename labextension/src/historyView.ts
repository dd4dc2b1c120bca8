// The sidebar's History view: a Slurm profile's jobs from accounting (`GET history`), every
// submitter's, ours and others marked, with profile / days / state filters and "Attach". The pure
// part is history.ts; this file draws it. Cluster text is set with textContent, never as HTML.

import { ApiError, TiersApi, query } from './api';
import {
  AttachTarget,
  DAY_CHOICES,
  DEFAULT_DAYS,
  HISTORY_STATES,
  HistoryFilters,
  HistoryRow,
  attachTarget,
  exitLabel,
  historyErrorText,
  historyProfiles,
  historyQuery,
  parseHistory,
  pickHistoryProfile,
  rowCells
} from './history';
import { Item } from './state';

function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls = '', text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (cls) {
    node.className = cls;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

export class HistoryView {
  /** The view's root, placed in the sidebar by its owner. */
  readonly node = el('div', 'jt-hist');

  constructor(
    private readonly api: TiersApi,
    private readonly attach: (target: AttachTarget) => void,
    private readonly known: () => ReadonlyMap<string, Item>
  ) {
    const filters = el('div', 'jt-hist-filters');
    this._profile.className = 'jt-hist-profile';
    this._profile.setAttribute('aria-label', 'History of profile');
    this._profile.title = 'A Slurm profile: its accounting (sacct) is the history';
    this._days.className = 'jt-hist-days';
    this._days.setAttribute('aria-label', 'History of the last days');
    for (const d of DAY_CHOICES) {
      const option = el('option', '', d === 1 ? '1 day' : `${d} days`);
      option.value = String(d);
      this._days.append(option);
    }
    this._days.value = String(DEFAULT_DAYS);
    this._state.className = 'jt-hist-state';
    this._state.setAttribute('aria-label', 'History of one state');
    for (const s of ['', ...HISTORY_STATES]) {
      const option = el('option', '', s || 'any state');
      option.value = s;
      this._state.append(option);
    }
    const reload = el('button', 'jt-hist-reload jp-Button', 'Reload');
    reload.title = 'Ask the cluster’s accounting again';
    reload.addEventListener('click', () => void this.reload());
    for (const select of [this._profile, this._days, this._state]) {
      select.addEventListener('change', () => void this.reload());
    }
    filters.append(this._profile, this._days, this._state, reload);
    this._list.setAttribute('role', 'list');
    this.node.append(filters, this._notice, this._list, this._empty);
  }

  /** The filters as chosen now. */
  get filters(): HistoryFilters {
    return { profile: this._profile.value, days: Number(this._days.value) || DEFAULT_DAYS, state: this._state.value };
  }

  /** The rows shown (for tests). */
  get rows(): readonly HistoryRow[] {
    return this._rows;
  }

  /** Loads the profiles and the history the first time the view is shown; later shows keep it. */
  show(): void {
    if (!this._started) {
      this._started = true;
      void this.reload(true);
    }
  }

  /** Asks the server again (and, with `profiles`, which Slurm profiles there are). Answers to an
   * older request than the latest are dropped, so quick filter changes cannot show stale rows. */
  async reload(profiles = false): Promise<void> {
    const seq = ++this._seq;
    this._say('Reading the cluster’s accounting…');
    try {
      if (profiles || this._profile.options.length === 0) {
        const list = await this.api.profiles();
        if (seq !== this._seq) {
          return;
        }
        this._setProfiles(historyProfiles(list.profiles, list.default));
      }
      const filters = this.filters;
      if (!filters.profile) {
        this._show([], '', 'No Slurm profile: job history comes from Slurm accounting (sacct).');
        return;
      }
      const data = await this.api.request<unknown>(`history${query(historyQuery(filters))}`);
      if (seq !== this._seq) {
        return;
      }
      const answer = parseHistory(data);
      const days = filters.days === 1 ? 'day' : `${filters.days} days`;
      this._show(answer.rows, answer.profile || filters.profile,
        answer.rows.length ? '' : `No jobs in the last ${days} on ${filters.profile}.`);
    } catch (err) {
      if (seq !== this._seq) {
        return;
      }
      this._rows = [];
      this._list.replaceChildren();
      this._empty.textContent = '';
      this._say(historyErrorText((err as Error).message), true);
      this.node.dataset.accounting = err instanceof ApiError && err.status === 409 ? 'off' : '';
    }
  }

  private _setProfiles(names: string[]): void {
    const current = pickHistoryProfile(names, this._profile.value);
    this._profile.replaceChildren(
      ...names.map(name => {
        const option = el('option', '', name);
        option.value = name;
        return option;
      })
    );
    this._profile.value = current;
    this._profile.disabled = names.length === 0;
  }

  private _show(rows: HistoryRow[], profile: string, empty: string): void {
    this._rows = rows;
    this._shownProfile = profile;
    this._say('');
    this.node.dataset.accounting = '';
    this._list.replaceChildren(...rows.map(row => this._row(row)));
    this._empty.textContent = empty;
  }

  private _row(row: HistoryRow): HTMLElement {
    const c = rowCells(row);
    const node = el('div', 'jt-hist-row');
    node.setAttribute('role', 'listitem');
    node.dataset.job = row.job_id;
    node.dataset.origin = c.origin;
    node.dataset.state = row.state;
    node.title = c.title;
    const line1 = el('div', 'jt-side-line');
    const badge = el('span', 'jt-side-badge', c.state);
    badge.dataset.class = c.stateClass;
    line1.append(badge, el('span', 'jt-hist-name', `${c.id} · ${c.name}`), el('span', 'jt-hist-elapsed', c.elapsed));
    const line2 = el('div', 'jt-side-line jt-side-meta');
    const origin = el('span', 'jt-hist-origin', c.origin);
    origin.dataset.origin = c.origin;
    const nodes = el('span', 'jt-hist-nodes', c.nodes);
    nodes.title = c.nodes; // cut first when the line is narrow
    const rss = el('span', 'jt-hist-rss', `max RSS ${c.maxRss}`);
    rss.title = rss.textContent ?? '';
    line2.append(origin, el('span', 'jt-hist-exit', exitLabel(c.exit)), nodes, rss);
    const attach = el('button', 'jt-hist-attach jp-Button', 'Attach');
    attach.title = row.ours ? 'Open its live panel (state, ranks, log)' : 'Open it read-only (state, end of its output)';
    attach.addEventListener('click', () => this.attach(attachTarget(this._shownProfile, row, this.known())));
    line2.append(attach);
    node.append(line1, line2);
    return node;
  }

  private _say(text: string, isError = false): void {
    this._notice.textContent = text;
    this._notice.classList.toggle('jt-hist-error', isError);
  }

  private _profile = el('select');
  private _days = el('select');
  private _state = el('select');
  private _notice = el('div', 'jt-hist-notice');
  private _list = el('div', 'jt-hist-list');
  private _empty = el('div', 'jt-hist-empty');
  private _rows: HistoryRow[] = [];
  private _shownProfile = '';
  private _started = false;
  private _seq = 0;
}
