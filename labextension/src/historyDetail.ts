// The read-only panel of a job from the History view that jupyter-tiers did not submit (plain
// sbatch, another tool): its accounting row and the end of its output when this account can read
// it (`GET history?job=ID&tail=N`). Nothing here acts on the job. Cluster text as textContent.

import { Widget } from '@lumino/widgets';

import { TiersApi, query } from './api';
import { DETAIL_TAIL, HistoryRow, detailQuery, historyErrorText, parseHistory, readonlyDetail } from './history';
import { stateClass } from './state';

export class HistoryDetail extends Widget {
  constructor(
    private readonly api: TiersApi,
    readonly profile: string,
    readonly row: HistoryRow
  ) {
    super();
    this.addClass('jt-hist-detail');
    this.id = `jupyter-tiers-history-${profile}-${row.job_id}`.replace(/[^A-Za-z0-9_-]/g, '_');
    this.title.label = `Job ${row.display_id} (read-only)`;
    this.title.caption = `job ${row.display_id} on ${profile}, not submitted by jupyter-tiers`;
    this.title.closable = true;
    this._head.className = 'jt-hist-detail-head';
    this._facts.className = 'jt-hist-facts';
    this._note.className = 'jt-hist-log-note';
    this._log.className = 'jt-hist-log';
    this._error.className = 'jt-detail-error';
    this.node.append(this._error, this._head, this._facts, this._note, this._log);
    void this.reload();
  }

  /** Reads the job's row and output end again. */
  async reload(): Promise<void> {
    const seq = ++this._seq;
    this._note.textContent = 'Reading…';
    try {
      const data = await this.api.request<unknown>(`history${query(detailQuery(this.profile, this.row))}`);
      if (seq !== this._seq || this.isDisposed) {
        return;
      }
      this._error.textContent = '';
      this._draw(readonlyDetail(parseHistory(data), this.row, DETAIL_TAIL));
    } catch (err) {
      if (seq === this._seq && !this.isDisposed) {
        this._note.textContent = '';
        this._error.textContent = historyErrorText((err as Error).message);
      }
    }
  }

  private _draw(detail: ReturnType<typeof readonlyDetail>): void {
    const state = detail.facts.find(([k]) => k === 'State')?.[1] ?? '';
    const badge = document.createElement('span');
    badge.className = 'jt-side-badge jt-hist-detail-state';
    badge.dataset.class = stateClass(state);
    badge.textContent = state;
    const what = document.createElement('span');
    what.className = 'jt-hist-detail-what';
    what.textContent = `job ${this.row.display_id} on ${this.profile} · not submitted by jupyter-tiers (read-only)`;
    this._head.replaceChildren(badge, what);
    this._facts.replaceChildren(
      ...detail.facts.flatMap(([label, value]) => {
        const dt = document.createElement('dt');
        dt.textContent = label;
        const dd = document.createElement('dd');
        dd.textContent = value;
        dd.dataset.fact = label;
        return [dt, dd];
      })
    );
    this._note.textContent = detail.logNote;
    this._log.textContent = detail.log ?? '';
    this._log.hidden = detail.log === null;
  }

  private _head = document.createElement('div');
  private _facts = document.createElement('dl');
  private _note = document.createElement('div');
  private _log = document.createElement('pre');
  private _error = document.createElement('div');
  private _seq = 0;
}
