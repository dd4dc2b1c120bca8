// The main-area panel of one job, array or service: the notebook widget's own view (rank grid,
// an array's task table or a pod table, live log, controls) driven by a ViewModel fed from the
// REST API and the log websocket.

import { Widget } from '@lumino/widgets';

import { ApiError, TiersApi, itemPath } from './api';
import {
  ARRAY_DEFAULTS,
  JOB_DEFAULTS,
  SERVE_DEFAULTS,
  ViewModel,
  ViewRequest,
  arrayAction,
  fileRows,
  streamTraits,
  taskItem,
  toRows
} from './adapter';
import { ReconnectingSocket } from './socket';
import { Item, Verb } from './state';
// The notebook widgets' own ES modules (jupyter_tiers/faces/widgets/, typed in views.d.ts), bundled
// from there by webpack. A job's panel is the notebook's JobView with its metric charts and Files
// tab (the server's view stream sends the series, the fold and the summary the kernel would); a
// service's has no kernel to run Try it or the Load panel.
import { jobView } from '../../jupyter_tiers/faces/widgets/job_view.js';
import { metricsChart } from '../../jupyter_tiers/faces/widgets/metrics_chart.js';
import { serveView } from '../../jupyter_tiers/faces/widgets/serve_view.js';
import arrayView from '../../jupyter_tiers/faces/widgets/array_view.js';
import { jtFilesPane } from '../../jupyter_tiers/faces/widgets/files_pane.js';

const JOB_VIEW = jobView({ charts: metricsChart, files: jtFilesPane });
const SERVE_VIEW = serveView({});

export class TiersDetail extends Widget {
  constructor(
    private readonly api: TiersApi,
    readonly item: Item,
    /** Opens another item's panel (a click on an array's task opens the task's own panel). */
    private readonly openItem: (item: Item) => void = () => undefined
  ) {
    super();
    this.addClass('jt-detail');
    this.id = `jupyter-tiers-detail-${item.key.replace(/[^A-Za-z0-9_-]/g, '_')}`;
    this.title.label = item.kind === 'job' ? `Job ${item.id}` : `Service ${item.name || item.id}`;
    this.title.caption = `${item.kind} ${item.id} on ${item.profile}`;
    this.title.closable = true;
    this._error.className = 'jt-detail-error';
    this.node.append(this._error, this._host);
    const defaults = item.kind === 'job' ? JOB_DEFAULTS : SERVE_DEFAULTS;
    this.model = new ViewModel(defaults, request => void this._onRequest(request));
    void this.reload();
  }

  /** The adapter the view draws from (for tests and the sidebar's updates). */
  readonly model: ViewModel;

  /**
   * Fetches the item's `view` again. By default from the server's shared watch (`?refresh=0`: the
   * sidebar calls this on every change, and open panels must not each poll the cluster); with
   * `refresh`, asked of the cluster now (the panel's Refresh button, after an action).
   */
  async reload(refresh = false): Promise<void> {
    if (this._loading) {
      this._again = true;
      this._againRefresh = this._againRefresh || refresh;
      return;
    }
    this._loading = true;
    try {
      const detail = await this.api.details(this.item.profile, this.item.id, refresh);
      if (this.isDisposed) {
        return;
      }
      this._error.textContent = '';
      if (!this._mounted && detail.view_kind === 'array') {
        this._array = true; // the notebook ArrayView's task table, not a rank grid
        this.title.label = `Array ${this.item.id}`;
        this.model.update(ARRAY_DEFAULTS);
      }
      // What the log stream decided (charts, fold label, the summary with the log's error) stays:
      // the listing's view does not read the log.
      this.model.update({ ...(detail.view ?? {}), ...this._streamView });
      if (this._array) {
        // The server's table knows neither that Cancel all was asked nor what was refused.
        this.model.set('cancel_requested', this._cancelAll);
        this.model.set('message', this._arrayMessage);
      }
      this._mount();
    } catch (err) {
      this._error.textContent = (err as Error).message;
      if (err instanceof ApiError && err.status === 404) {
        this._stream?.close(); // the item is gone: nothing more will come
      }
    } finally {
      this._loading = false;
    }
    if (this._again && !this.isDisposed) {
      const again = this._againRefresh;
      this._again = false;
      this._againRefresh = false;
      await this.reload(again);
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._stream?.close();
    this._cleanup?.();
    this.model.dispose();
    super.dispose();
  }

  /** Renders the view once, on the first answer (so it starts from the real traits). */
  private _mount(): void {
    if (this._mounted) {
      return;
    }
    this._mounted = true;
    const module = this._array ? arrayView : this.item.kind === 'job' ? JOB_VIEW : SERVE_VIEW;
    const cleanup = module.render({ model: this.model, el: this._host });
    this._cleanup = typeof cleanup === 'function' ? cleanup : null;
  }

  /** What the view asked for: the log (hello), or an action mapped onto the REST routes. */
  private async _onRequest(request: ViewRequest): Promise<void> {
    if (this._array) {
      return this._onArrayRequest(request);
    }
    const kind = request.kind;
    if (kind === 'hello') {
      this._follow();
      return;
    }
    if (kind === 'metrics_rank') {
      this._stream?.send(JSON.stringify({ kind: 'metrics_rank', rank: request.rank }));
      return;
    }
    if (kind === 'files' || kind === 'download') {
      void this._onFiles(request);
      return;
    }
    if (kind === 'stacks') {
      void this._onStacks();
      return;
    }
    if (kind === 'port_forward') {
      this.model.set('message', 'Port-forward runs in a kernel: use the notebook widget or %tiers.');
      return;
    }
    if (!isVerb(kind)) {
      return;
    }
    const replicas = kind === 'scale' ? Number(request.replicas) : undefined;
    if (kind === 'cancel') {
      this.model.set('cancel_requested', true);
    } else {
      this.model.set('busy', kind);
      if (replicas !== undefined) {
        this.model.set('scale_target', replicas);
      }
    }
    try {
      const message = await this.api.act(this.item.profile, this.item.id, kind, replicas);
      this.model.set('message', message);
    } catch (err) {
      this.model.set('message', `${kind} failed: ${(err as Error).message}`);
      if (kind === 'cancel') {
        this.model.set('cancel_requested', false);
      }
    } finally {
      if (kind !== 'cancel') {
        this.model.set('busy', '');
      }
    }
    void this.reload(true);
  }

  /**
   * An array table's request: Cancel all (the array's cancel), Cancel on a row (the task's own
   * `ID_i` cancel), or a click on a row (the task's own job panel). As in the notebook, only a
   * refusal is shown in the table's message; the button may then be pressed again.
   */
  private async _onArrayRequest(request: ViewRequest): Promise<void> {
    const action = arrayAction(request, this.item.id);
    if (action === null) {
      return;
    }
    if (action.action === 'open') {
      this.model.set('selected', action.task);
      const rows = this.model.get('tasks');
      const row = Array.isArray(rows) ? rows.find(r => Array.isArray(r) && r[0] === action.task) : undefined;
      this.openItem(taskItem(this.item, action.task, row));
      return;
    }
    if (action.task === null) {
      this._cancelAll = true;
      this.model.set('cancel_requested', true);
    }
    try {
      await this.api.act(this.item.profile, action.id, 'cancel');
      this._arrayMessage = '';
    } catch (err) {
      const what = action.task === null ? 'cancel' : `cancel of task ${action.task}`;
      this._arrayMessage = `${what} failed: ${(err as Error).message}`;
      this.model.set('message', this._arrayMessage);
      if (action.task === null) {
        this._cancelAll = false;
        this.model.set('cancel_requested', false);
      }
    }
    void this.reload(true);
  }

  /** The Stacks button: `POST .../stacks`; its text (or why it failed) under the controls. */
  private async _onStacks(): Promise<void> {
    if (this.model.get('stacks_busy')) {
      return;
    }
    this.model.set('stacks_busy', true);
    try {
      this.model.set('stacks_text', await this.api.stacks(this.item.profile, this.item.id));
    } catch (err) {
      this.model.set('stacks_text', `stacks could not be taken: ${(err as Error).message}`);
    } finally {
      this.model.set('stacks_busy', false);
    }
  }

  /**
   * The Files tab: list through `GET .../files`; a Download lets the browser save the listed
   * file from `GET .../files/NAME` (an attachment, streamed to disk by the browser).
   */
  private async _onFiles(request: ViewRequest): Promise<void> {
    if (request.kind === 'files') {
      this.model.set('files_note', 'listing…');
      try {
        const rows = fileRows(await this.api.files(this.item.profile, this.item.id));
        this.model.set('files', rows);
        this.model.set('files_note', rows.length ? '' : 'the job left no files (yet)');
      } catch (err) {
        this.model.set('files_note', `cannot list the files: ${(err as Error).message}`);
      }
      return;
    }
    const name = request.name;
    const listed = this.model.get('files');
    if (typeof name !== 'string' || !Array.isArray(listed) || !listed.some(r => Array.isArray(r) && r[0] === name)) {
      return;
    }
    const link = document.createElement('a');
    link.href = this.api.fileUrl(this.item.profile, this.item.id, name);
    link.download = name.split('/').pop() || 'download';
    link.rel = 'noopener';
    link.style.display = 'none';
    document.body.appendChild(link);
    link.click();
    link.remove();
    const downloads = { ...(this.model.get('downloads') as Record<string, string>) };
    downloads[name] = 'saved by the browser (its downloads folder)';
    this.model.set('downloads', downloads);
  }

  /**
   * (Re)starts the log stream from the beginning; the first batch replaces what the view has. A
   * job's stream is the notebook widget's (`view=1`): `lines` messages with the error lines and
   * the fail-stop's fold, and `view` messages with the traits the log decides.
   */
  private _follow(): void {
    this._stream?.close();
    this._offset = 0;
    let reset = true;
    const job = this.item.kind === 'job';
    this._stream = new ReconnectingSocket({
      // A reconnect resumes at the last offset: nothing lost, nothing twice.
      url: () =>
        this.api.wsUrl(`${itemPath(this.item.profile, this.item.id)}/logs/stream`, {
          offset: this._offset,
          ...(job ? { view: 1 } : {})
        }),
      onMessage: text => {
        let batch: Record<string, unknown>;
        try {
          batch = JSON.parse(text);
        } catch {
          return;
        }
        if (typeof batch.error === 'string') {
          this._error.textContent = batch.error;
          return;
        }
        if (typeof batch.offset === 'number') {
          this._offset = batch.offset;
        }
        const view = streamTraits(batch.view);
        if (view) {
          Object.assign(this._streamView, view);
          this.model.update(view);
          return;
        }
        if (typeof batch.text === 'string') {
          this.model.custom({ ...batch, reset: reset || batch.reset === true });
          reset = false;
        } else {
          const rows = toRows(batch.lines);
          if (rows.length || reset) {
            this.model.custom({ kind: 'lines', lines: rows, skipped: 0, reset });
            reset = false;
          }
        }
        if (batch.eof === true && !job) {
          this._stream?.close(); // the job ended and its whole log was sent: nothing to resume
        }
      }
    });
  }

  private _host = document.createElement('div');
  private _error = document.createElement('div');
  private _stream: ReconnectingSocket | null = null;
  private _offset = 0;
  private _mounted = false;
  private _array = false;
  private _cancelAll = false;
  private _arrayMessage = '';
  private _loading = false;
  private _again = false;
  private _againRefresh = false;
  /** The traits the log stream sent, kept over the listing's view on every re-read. */
  private _streamView: Record<string, unknown> = {};
  private _cleanup: (() => void) | null = null;
}

/** Whether a view's request names one of the server's verbs (cancel, scale, restart, promote,
 * rollback, delete). */
function isVerb(kind: unknown): kind is Verb {
  return (
    kind === 'cancel' ||
    kind === 'scale' ||
    kind === 'restart' ||
    kind === 'promote' ||
    kind === 'rollback' ||
    kind === 'delete'
  );
}
