// A stand-in for the anywidget model, so the lab panel drives the notebook widgets' own view code
// (jupyter_tiers/faces/widgets/job_view.js, serve_view.js, array_view.js) with state from the REST API instead of a
// kernel comm. Pure: no DOM, no network; the panel feeds it and handles what the view sends.

import type { Item } from './state';

// The views' trait defaults, generated from jupyter_tiers/app/viewstate/schema.py.
export { ARRAY_DEFAULTS, JOB_DEFAULTS, SERVE_DEFAULTS } from './viewDefaults';

type Callback = (...args: unknown[]) => void;

/** What a view asks for with `model.send` (e.g. {kind: "cancel"} or {kind: "scale", replicas}). */
export type ViewRequest = Record<string, unknown> & { kind?: unknown };

/** Rows of a log batch as the views draw them: [rank or pod, text, is_error]. */
export type LogRow = [number | string | null, string, boolean];

/** The JobView/ServeView notion of an error line (jupyter_tiers/app/viewstate/job.py ERROR_RE). */
const ERROR_RE =
  /Traceback \(most recent call last\)|^\w*(Error|Exception)\b|\berror:|\bFATAL\b|Segmentation fault/;

/** The log API's [rank_or_pod, text(, is_error)] rows as view rows; malformed rows are dropped. */
export function toRows(lines: unknown): LogRow[] {
  if (!Array.isArray(lines)) {
    return [];
  }
  const rows: LogRow[] = [];
  for (const line of lines) {
    if (!Array.isArray(line) || typeof line[1] !== 'string') {
      continue;
    }
    const who = typeof line[0] === 'number' || typeof line[0] === 'string' ? line[0] : null;
    const isError = typeof line[2] === 'boolean' ? line[2] : ERROR_RE.test(line[1]);
    rows.push([who, line[1], isError]);
  }
  return rows;
}

function same(a: unknown, b: unknown): boolean {
  if (a === b) {
    return true;
  }
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) {
    return false;
  }
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * The subset of anywidget's model API the views use: get/set/on/off/send/save_changes.
 * `update(view)` applies a new `view` dict from the server and fires `change:NAME` for every
 * trait whose value changed (like a comm sync); `custom(msg)` delivers a `msg:custom` message;
 * `send` hands the view's requests to `onSend`.
 */
export class ViewModel {
  constructor(
    defaults: Record<string, unknown>,
    private readonly onSend: (request: ViewRequest) => void
  ) {
    this._values = { ...defaults };
  }

  get(name: string): unknown {
    return this._values[name];
  }

  /** Sets a trait locally (a view's own change), firing `change:NAME` when the value changed. */
  set(name: string, value: unknown): void {
    if (same(this._values[name], value)) {
      return;
    }
    this._values[name] = value;
    this._emit(`change:${name}`, value);
  }

  /** Nothing to sync: the server is the only source of truth. */
  save_changes(): void {
    // the views never rely on a round trip of their own sets
  }

  on(event: string, callback: Callback): void {
    let list = this._handlers.get(event);
    if (!list) {
      list = [];
      this._handlers.set(event, list);
    }
    list.push(callback);
  }

  /** Removes one callback, every callback of an event, or (no arguments) all of them. */
  off(event?: string, callback?: Callback): void {
    if (event === undefined) {
      this._handlers.clear();
      return;
    }
    if (callback === undefined) {
      this._handlers.delete(event);
      return;
    }
    const list = this._handlers.get(event);
    if (list) {
      this._handlers.set(
        event,
        list.filter(cb => cb !== callback)
      );
    }
  }

  send(content: unknown): void {
    if (this._disposed) {
      return;
    }
    if (typeof content === 'object' && content !== null && !Array.isArray(content)) {
      this.onSend(content as ViewRequest);
    }
  }

  /** Applies a server `view` dict: every changed trait fires once, after all are set. */
  update(view: Record<string, unknown>): void {
    const changed: string[] = [];
    for (const [name, value] of Object.entries(view)) {
      if (!same(this._values[name], value)) {
        this._values[name] = value;
        changed.push(name);
      }
    }
    for (const name of changed) {
      this._emit(`change:${name}`, this._values[name]);
    }
  }

  /** Delivers a custom message (a log batch) to the view. */
  custom(msg: unknown): void {
    this._emit('msg:custom', msg, []);
  }

  /** Drops every handler; later sends are ignored. */
  dispose(): void {
    this._disposed = true;
    this._handlers.clear();
  }

  private _emit(event: string, ...args: unknown[]): void {
    for (const cb of [...(this._handlers.get(event) ?? [])]) {
      cb(...args);
    }
  }

  private _values: Record<string, unknown>;
  private _handlers = new Map<string, Callback[]>();
  private _disposed = false;
}

/** The Files tab's groups (files.py GROUPS): what the job wrote, its checkpoints, its log, and
 * what jupyter-tiers wrote to run it. */
const FILE_GROUPS = new Set(['output', 'checkpoints', 'log', 'tiers']);

/** The `GET .../files` answer as the Files tab's rows [name, size, mtime, group], in the server's
 * order (the job's outputs first); malformed entries (not a name, a negative size) are dropped,
 * an unknown or missing group reads `output` (an older server). */
export function fileRows(data: unknown): [string, number, number, string][] {
  const files = data && typeof data === 'object' ? (data as { files?: unknown }).files : undefined;
  if (!Array.isArray(files)) {
    return [];
  }
  const rows: [string, number, number, string][] = [];
  for (const f of files) {
    if (!f || typeof f !== 'object') {
      continue;
    }
    const { name, size, mtime, group } = f as Record<string, unknown>;
    if (typeof name === 'string' && name && typeof size === 'number' && size >= 0) {
      const g = typeof group === 'string' && FILE_GROUPS.has(group) ? group : 'output';
      rows.push([name, size, typeof mtime === 'number' ? mtime : 0, g]);
    }
  }
  return rows;
}

/**
 * What an array table's request means for the panel: cancel the whole array or one task (a task
 * is its own job, `ID_i`), or open a task's own detail panel. Null for anything else (a task
 * that is not a whole number from 0).
 */
export type ArrayAction =
  | { action: 'cancel'; id: string; task: number | null }
  | { action: 'open'; id: string; task: number };

export function arrayAction(request: ViewRequest, arrayId: string): ArrayAction | null {
  const task = request.task;
  const valid = typeof task === 'number' && Number.isSafeInteger(task) && task >= 0;
  switch (request.kind) {
    case 'cancel':
      return { action: 'cancel', id: arrayId, task: null };
    case 'cancel_task':
      return valid ? { action: 'cancel', id: `${arrayId}_${task}`, task } : null;
    case 'select':
      return valid ? { action: 'open', id: `${arrayId}_${task}`, task } : null;
    default:
      return null;
  }
}

/** The sidebar item of task `task` of an array (what its own detail panel is opened with). */
export function taskItem(array: Item, task: number, row?: unknown): Item {
  const id = `${array.id}_${task}`;
  const state = Array.isArray(row) && typeof row[2] === 'string' ? row[2] : 'PENDING';
  return {
    ...array,
    key: `${array.profile}/${id}`,
    id,
    name: `${array.name} task ${task}`,
    state,
    terminal: false,
    summary: `task ${task} of array ${array.id}`
  };
}

/**
 * The traits a job's view stream (`logs/stream?view=1`) may set over the REST view: what the log
 * decides, as the notebook kernel sets them (anything else in a message is ignored).
 */
const STREAM_TRAITS = new Set(['metrics', 'metrics_rank', 'metrics_note', 'fold_label', 'summary']);

/** A stream message's `view` with only the traits the stream may set; null when it has none. */
export function streamTraits(view: unknown): Record<string, unknown> | null {
  if (!view || typeof view !== 'object' || Array.isArray(view)) {
    return null;
  }
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(view)) {
    if (STREAM_TRAITS.has(name)) {
      out[name] = value;
    }
  }
  return Object.keys(out).length ? out : null;
}
