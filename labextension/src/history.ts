// The sidebar's History view, pure part (no DOM, no network): the `GET history` answer as typed
// rows, the filters and their query, how a row is shown, what "Attach" opens, and the read-only
// detail of a job not submitted from here. See jupyter_tiers/faces/server/API.md.

import { Profile } from './api';
import { Item, formatElapsed, stateClass } from './state';

/** One job from Slurm accounting (`GET history`'s Row). */
export interface HistoryRow {
  job_id: string;
  display_id: string;
  name: string;
  user: string;
  state: string;
  exit: string;
  exit_code: number | null;
  elapsed_s: number | null;
  nodes: number | null;
  nodelist: string;
  /** Bytes: the largest task of any step; null when accounting has no sample. */
  max_rss: number | null;
  submit: string;
  start: string;
  end: string;
  partition: string;
  workdir: string;
  /** True when this registry submitted it; `key` is then its `profile/id`. */
  ours: boolean;
  key: string;
}

export interface HistoryAnswer {
  profile: string;
  rows: HistoryRow[];
  /** The end of one foreign job's output (`job` + `tail` asked), null when not readable. */
  output: string | null;
  output_path: string;
}

/** The view's filters. `days` is one of DAY_CHOICES; `state` "" for any. */
export interface HistoryFilters {
  profile: string;
  days: number;
  state: string;
}

export const DAY_CHOICES = [1, 7, 30, 90, 366];
export const DEFAULT_DAYS = 7;
/** Most rows the view asks for. */
export const HISTORY_LIMIT = 200;
/** Lines of a foreign job's output the read-only detail asks for. */
export const DETAIL_TAIL = 200;
/** States offered by the state filter (sacct's names; the server takes these or short codes). */
export const HISTORY_STATES = ['COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'RUNNING', 'PENDING',
  'OUT_OF_MEMORY', 'NODE_FAIL', 'PREEMPTED'];

const JOB_REF = /^\d{1,20}(?:_\d{1,10})?$/;

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

function count(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : null;
}

/** A row from the server's JSON, or null when it lacks an id or a state. */
export function parseRow(value: unknown): HistoryRow | null {
  if (typeof value !== 'object' || value === null) {
    return null;
  }
  const v = value as Record<string, unknown>;
  const jobId = text(v.job_id);
  const state = text(v.state);
  if (!/^\d+$/.test(jobId) || !state) {
    return null;
  }
  const exitCode = typeof v.exit_code === 'number' ? v.exit_code : null;
  const ours = v.ours === true && text(v.key) !== '';
  return {
    job_id: jobId,
    display_id: text(v.display_id) || jobId,
    name: text(v.name),
    user: text(v.user),
    state,
    exit: text(v.exit) || (exitCode === null ? '-' : String(exitCode)),
    exit_code: exitCode,
    elapsed_s: count(v.elapsed_s),
    nodes: count(v.nodes),
    nodelist: text(v.nodelist),
    max_rss: count(v.max_rss),
    submit: text(v.submit),
    start: text(v.start),
    end: text(v.end),
    partition: text(v.partition),
    workdir: text(v.workdir),
    ours,
    key: ours ? text(v.key) : ''
  };
}

/** The `GET history` answer as typed values (malformed rows dropped). */
export function parseHistory(data: unknown): HistoryAnswer {
  const raw = (data ?? {}) as Record<string, unknown>;
  const rows: HistoryRow[] = [];
  for (const entry of Array.isArray(raw.rows) ? raw.rows : []) {
    const row = parseRow(entry);
    if (row) {
      rows.push(row);
    }
  }
  return {
    profile: text(raw.profile),
    rows,
    output: typeof raw.output === 'string' ? raw.output : null,
    output_path: text(raw.output_path)
  };
}

/** The query of a list request (api.query drops the empty values). */
export function historyQuery(f: HistoryFilters, limit = HISTORY_LIMIT): Record<string, string | number | undefined> {
  return { profile: f.profile || undefined, days: f.days, state: f.state || undefined, limit };
}

/** The query of one job's read-only detail: its row and the end of its output. */
export function detailQuery(profile: string, row: HistoryRow, tail = DETAIL_TAIL): Record<string, string | number> {
  return { profile, job: jobRef(row), tail };
}

/** What sacct and scontrol take for this job: `12_3` for an array task, else the raw id. */
export function jobRef(row: HistoryRow): string {
  return JOB_REF.test(row.display_id) ? row.display_id : row.job_id;
}

/** The profiles history can come from (Slurm's), the default first when it is one. */
export function historyProfiles(profiles: Profile[], defaultName: string | null): string[] {
  const names = profiles.filter(p => p.tier === 'slurm').map(p => p.name).sort();
  if (defaultName && names.includes(defaultName)) {
    return [defaultName, ...names.filter(n => n !== defaultName)];
  }
  return names;
}

/** The profile to show: the current choice while it still exists, else the first offered. */
export function pickHistoryProfile(names: string[], current: string): string {
  return names.includes(current) ? current : names[0] ?? '';
}

/** Bytes as `512B`, `15.9M`, `1.5G` (the `%tiers history` table's format); `-` when unknown. */
export function formatBytes(value: number | null): string {
  if (value === null || !Number.isFinite(value) || value < 0) {
    return '-';
  }
  let size = value;
  for (const unit of ['B', 'K', 'M', 'G']) {
    if (size < 1024) {
      if (unit === 'B') {
        return `${Math.floor(size)}B`;
      }
      return size < 100 ? `${size.toFixed(1)}${unit}` : `${Math.round(size)}${unit}`;
    }
    size /= 1024;
  }
  return `${size.toFixed(1)}T`;
}

/** Cluster text made safe to show as one line: control characters become `?` (it is set with
 * textContent anyway; this keeps a name with a newline or an escape from breaking the row). */
export function oneLine(value: string, width = 80): string {
  // eslint-disable-next-line no-control-regex
  const clean = value.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
  return clean.length <= width ? clean : `${clean.slice(0, width - 1)}…`;
}

/** A log's text with control characters other than newline and tab shown as `?`. */
export function cleanLog(value: string): string {
  // eslint-disable-next-line no-control-regex
  return value.replace(/\r\n/g, '\n').replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, '?');
}

/** The cells of one row, as text. */
export interface RowCells {
  id: string;
  name: string;
  state: string;
  stateClass: string;
  elapsed: string;
  exit: string;
  nodes: string;
  maxRss: string;
  origin: 'ours' | 'other';
  title: string;
}

/**
 * The EXIT cell's words: `exit 1`, `exit 0:15`; who failed as the server names it
 * (`rank 3 exit 1`, `step 0 exit 1`) as it comes.
 */
export function exitLabel(exit: string): string {
  return /^(-|\d)/.test(exit) ? `exit ${exit}` : exit;
}

export function rowCells(row: HistoryRow): RowCells {
  const nodes = row.nodes ? `${row.nodes} ${row.nodelist}`.trim() : row.nodelist || '-';
  return {
    id: row.display_id,
    name: oneLine(row.name || '(no name)', 60),
    state: row.state,
    stateClass: stateClass(row.state),
    elapsed: formatElapsed(row.elapsed_s) || '-',
    exit: row.exit,
    nodes: oneLine(nodes, 60),
    maxRss: formatBytes(row.max_rss),
    origin: row.ours ? 'ours' : 'other',
    title: row.ours
      ? `job ${row.display_id}, submitted by jupyter-tiers (${row.key}): Attach opens its live panel`
      : `job ${row.display_id} of ${oneLine(row.user || 'someone', 40)}, not submitted by jupyter-tiers: read-only`
  };
}

/** What "Attach" opens: our job's full detail panel, or the read-only panel of another's. */
export type AttachTarget = { kind: 'item'; item: Item } | { kind: 'readonly'; profile: string; row: HistoryRow };

export function attachTarget(profile: string, row: HistoryRow, known?: ReadonlyMap<string, Item>): AttachTarget {
  if (!row.ours) {
    return { kind: 'readonly', profile, row };
  }
  const have = known?.get(row.key);
  if (have) {
    return { kind: 'item', item: have };
  }
  const slash = row.key.indexOf('/');
  const item: Item = {
    key: row.key,
    id: slash >= 0 ? row.key.slice(slash + 1) : row.job_id,
    kind: 'job',
    name: row.name,
    profile: slash >= 0 ? row.key.slice(0, slash) : profile,
    tier: 'slurm',
    state: row.state,
    terminal: stateClass(row.state) !== 'active' && stateClass(row.state) !== 'waiting',
    size: row.nodes ? `${row.nodes} nodes` : '',
    where: row.nodelist,
    reason: '',
    started: row.start || null,
    elapsed_s: row.elapsed_s,
    summary: ''
  };
  return { kind: 'item', item };
}

/** The read-only detail of one job: labelled facts, then its output or why there is none. */
export interface ReadonlyDetail {
  facts: Array<[string, string]>;
  log: string | null;
  logNote: string;
}

export function readonlyDetail(answer: HistoryAnswer, asked: HistoryRow, tail = DETAIL_TAIL): ReadonlyDetail {
  const row = answer.rows.find(r => r.job_id === asked.job_id) ?? asked;
  const c = rowCells(row);
  const facts: Array<[string, string]> = [
    ['Job', row.display_id],
    ['Name', oneLine(row.name || '-', 200)],
    ['User', oneLine(row.user || '-', 60)],
    ['State', row.state],
    ['Exit code', row.exit],
    ['Elapsed', c.elapsed],
    ['Nodes', c.nodes],
    ['Max RSS', c.maxRss],
    ['Partition', oneLine(row.partition || '-', 60)],
    ['Submitted', row.submit.replace('T', ' ') || '-'],
    ['Started', row.start.replace('T', ' ') || '-'],
    ['Ended', row.end.replace('T', ' ') || '-'],
    ['Working directory', oneLine(row.workdir || '-', 400)]
  ];
  if (!answer.rows.some(r => r.job_id === asked.job_id)) {
    return { facts, log: null, logNote: `Job ${asked.display_id} is no longer in this profile's accounting.` };
  }
  if (answer.output !== null) {
    const where = answer.output_path ? ` of ${oneLine(answer.output_path, 400)}` : '';
    return { facts, log: cleanLog(answer.output), logNote: `Last ${tail} lines${where} (read-only)` };
  }
  const where = answer.output_path ? oneLine(answer.output_path, 400) : '(no working directory in accounting)';
  return {
    facts,
    log: null,
    logNote:
      `Its output is not readable at ${where}: removed, written elsewhere with --output after ` +
      "slurmctld forgot the job, or another user's file."
  };
}

/** The view's message for a failed request. A cluster without accounting answers 409 with its
 * own sentence ("no job history: Slurm accounting is off ..."), shown as it is, capitalised. */
export function historyErrorText(message: string): string {
  return message ? message[0].toUpperCase() + message.slice(1) : 'the history could not be read';
}
