// The sidebar's state and the pure functions over it (no DOM, no Lumino, no network): applying the
// `events` websocket's messages, filtering and searching, and formatting elapsed times.

/** One job or service, as `GET jobs` and the `events` websocket describe it. */
export interface Item {
  key: string;
  id: string;
  kind: 'job' | 'service';
  name: string;
  profile: string;
  tier: string;
  state: string;
  terminal: boolean;
  size: string;
  where: string;
  reason: string;
  started: string | null;
  elapsed_s: number | null;
  /** When `elapsed_s` was true, in the server's epoch seconds: the age ticks from here. */
  elapsed_at?: number | null;
  summary: string;
  /** When it was submitted (ISO-8601), if the server says. */
  submitted?: string | null;
  /** A service's live canary (`--canary`): its share in percent. */
  canary?: number | null;
  /** `--checkpoint-to`: the job's checkpoint upload on record, if any. */
  upload?: Upload | null;
  /** The server's revision of this item (higher is newer; see `mergeList`). */
  rev?: number;
  /** The Slurm job this JupyterLab itself runs inside (ownJob.ts): never offered Cancel. */
  own?: boolean;
  /** Why that row has no Cancel (its tooltip). */
  own_note?: string;
  /** Its profile no longer exists: nothing can check it; only Forget applies. */
  orphan?: boolean;
}

/** A job's checkpoint upload (`--checkpoint-to`), as the registry records it. */
export interface Upload {
  state: 'uploading' | 'done' | 'interrupted' | 'failed';
  uri?: string;
  sent?: number;
  total?: number;
  error?: string;
}

const UPLOAD_STATES = new Set(['uploading', 'done', 'interrupted', 'failed']);

/** The upload of a server item when it has that shape, else null (a newer or broken server). */
export function asUpload(value: unknown): Upload | null {
  if (typeof value !== 'object' || value === null) {
    return null;
  }
  const v = value as Record<string, unknown>;
  if (typeof v.state !== 'string' || !UPLOAD_STATES.has(v.state)) {
    return null;
  }
  const out: Upload = { state: v.state as Upload['state'] };
  if (typeof v.uri === 'string') {
    out.uri = v.uri;
  }
  if (typeof v.error === 'string') {
    out.error = v.error;
  }
  for (const key of ['sent', 'total'] as const) {
    const n = v[key];
    if (typeof n === 'number' && Number.isFinite(n) && n >= 0) {
      out[key] = n;
    }
  }
  return out;
}

/** `1.2 of 2.7 GB`: both sizes in the unit of the total (decimal units, one decimal). */
export function sizePair(sent: number, total: number): string {
  const units: [number, string][] = [
    [1e12, 'TB'],
    [1e9, 'GB'],
    [1e6, 'MB'],
    [1e3, 'kB']
  ];
  const [scale, unit] = units.find(([s]) => total >= s) ?? [1, 'B'];
  const fmt = (n: number) => (scale === 1 ? String(Math.round(n)) : (n / scale).toFixed(1));
  return `${fmt(sent)} of ${fmt(total)} ${unit}`;
}

/**
 * The job row's upload line: `uploading 45 % (1.2 of 2.7 GB)`, then the checkpoint's URI; why
 * it failed, or where an interrupted one stopped (`job.upload()` resumes it). "" when none.
 */
export function uploadText(upload: Upload | null | undefined): string {
  if (!upload) {
    return '';
  }
  const { sent, total } = upload;
  const known = typeof sent === 'number' && typeof total === 'number' && total > 0;
  const pct = known ? Math.min(100, Math.floor((sent! * 100) / total!)) : 0;
  const progress = known ? `${pct} % (${sizePair(sent!, total!)})` : '';
  const line = (text: string) => text.split(/\s+/).join(' ').trim();
  switch (upload.state) {
    case 'done':
      return line(upload.uri ? `checkpoint ${upload.uri}` : 'checkpoint uploaded');
    case 'uploading':
      return line(`uploading ${progress}` + (upload.uri ? ` to ${upload.uri}` : ''));
    case 'interrupted':
      return line(`upload interrupted ${progress ? `at ${progress}` : ''} — job.upload() resumes it`);
    case 'failed':
      return line(`upload failed${upload.error ? `: ${upload.error}` : ''}`);
  }
}

/** The verbs of a list row's actions (each a server route, see api.ts). */
export type Verb = 'cancel' | 'scale' | 'restart' | 'promote' | 'rollback' | 'delete' | 'forget';

/** A profile whose cluster could not be asked, and why. */
export interface ProfileError {
  profile: string;
  message: string;
}

/** A message of the `events` websocket. */
export type EventMessage =
  | { type: 'snapshot'; items: Item[]; rev?: number; serverTime?: number }
  | { type: 'update'; items: Item[] }
  | { type: 'removed'; keys: string[]; rev?: number }
  | { type: 'error'; profile: string; message: string };

export interface State {
  /** Items by key. */
  items: ReadonlyMap<string, Item>;
  /** When (ms, the page's monotonic clock) each item's `elapsed_s` was received: the local tick starts there. */
  receivedAt: ReadonlyMap<string, number>;
  /** The latest error per profile; a snapshot or an update of that profile clears it. */
  errors: ReadonlyMap<string, string>;
  /** True once a snapshot arrived. */
  loaded: boolean;
  /** The highest server revision this state has heard of (a message's or a list answer's). */
  rev?: number;
}

export const EMPTY: State = {
  items: new Map(),
  receivedAt: new Map(),
  errors: new Map(),
  loaded: false
};

function revOf(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

/** Whether `held` is known to be newer than `incoming` (both have revisions, `held`'s higher). */
function newer(held: number | undefined, incoming: number | undefined): boolean {
  return held !== undefined && incoming !== undefined && held > incoming;
}

function maxRev(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.max(a, b);
}

const KINDS = new Set(['job', 'service']);

/** Whether a value from the server has the shape of an Item (fields the panel reads). */
export function isItem(value: unknown): value is Item {
  if (typeof value !== 'object' || value === null) {
    return false;
  }
  const v = value as Record<string, unknown>;
  return (
    typeof v.key === 'string' &&
    typeof v.id === 'string' &&
    typeof v.profile === 'string' &&
    typeof v.state === 'string' &&
    typeof v.kind === 'string' &&
    KINDS.has(v.kind)
  );
}

/** Fills the optional fields an item may lack, so renderers need no checks. */
export function normalize(raw: Item): Item {
  return {
    ...raw,
    name: raw.name ?? '',
    tier: raw.tier ?? '',
    terminal: Boolean(raw.terminal),
    size: raw.size ?? '',
    where: raw.where ?? '',
    reason: raw.reason ?? '',
    started: raw.started ?? null,
    elapsed_s: typeof raw.elapsed_s === 'number' ? raw.elapsed_s : null,
    summary: raw.summary ?? '',
    upload: asUpload(raw.upload),
    rev: revOf(raw.rev),
    own: raw.own === true,
    own_note: typeof raw.own_note === 'string' ? raw.own_note : ''
  };
}

/**
 * Parses one websocket frame; null when it is not JSON or not a message the panel knows (a newer
 * server may send more types; they are ignored rather than breaking the panel).
 */
export function parseEvent(text: string): EventMessage | null {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof data !== 'object' || data === null) {
    return null;
  }
  const msg = data as Record<string, unknown>;
  switch (msg.type) {
    case 'snapshot':
      return Array.isArray(msg.items)
        ? {
            type: 'snapshot',
            items: msg.items.filter(isItem),
            rev: revOf(msg.rev),
            serverTime: typeof msg.server_time === 'number' && Number.isFinite(msg.server_time) ? msg.server_time : undefined
          }
        : null;
    case 'update':
      return Array.isArray(msg.items) ? { type: 'update', items: msg.items.filter(isItem) } : null;
    case 'removed':
      return Array.isArray(msg.keys)
        ? { type: 'removed', keys: msg.keys.filter(k => typeof k === 'string'), rev: revOf(msg.rev) }
        : null;
    case 'error':
      return {
        type: 'error',
        profile: String(msg.profile ?? ''),
        message: String(msg.message ?? 'unknown error')
      };
    default:
      return null;
  }
}

/** The state after one message; `now` is when it arrived (ms). Never mutates `state`. */
export function reduce(state: State, msg: EventMessage, now: number): State {
  switch (msg.type) {
    case 'snapshot': {
      const items = new Map<string, Item>();
      const receivedAt = new Map<string, number>();
      for (const raw of msg.items) {
        items.set(raw.key, normalize(raw));
        receivedAt.set(raw.key, now);
      }
      return { items, receivedAt, errors: new Map(), loaded: true, rev: msg.rev };
    }
    case 'update': {
      if (msg.items.length === 0) {
        return state;
      }
      const items = new Map(state.items);
      const receivedAt = new Map(state.receivedAt);
      const errors = new Map(state.errors);
      let rev = state.rev;
      for (const raw of msg.items) {
        const item = normalize(raw);
        rev = maxRev(rev, item.rev);
        errors.delete(raw.profile);
        // A `GET jobs` answer applied meanwhile may hold a newer revision than this update.
        if (newer(items.get(raw.key)?.rev, item.rev)) {
          continue;
        }
        items.set(raw.key, item);
        receivedAt.set(raw.key, now);
      }
      return { ...state, items, receivedAt, errors, rev };
    }
    case 'removed': {
      const rev = maxRev(state.rev, msg.rev);
      const gone = msg.keys.filter(k => state.items.has(k) && !newer(state.items.get(k)?.rev, msg.rev));
      if (!gone.length) {
        return rev === state.rev ? state : { ...state, rev };
      }
      const items = new Map(state.items);
      const receivedAt = new Map(state.receivedAt);
      for (const key of gone) {
        items.delete(key);
        receivedAt.delete(key);
      }
      return { ...state, items, receivedAt, rev };
    }
    case 'error': {
      const errors = new Map(state.errors);
      errors.set(msg.profile, msg.message);
      return { ...state, errors };
    }
  }
}

/** Fields whose change does not call for a detail panel's reload (they tick by themselves). */
// `rev` is bookkeeping: an update that only moves the clock takes a new revision too, and must
// not redraw the row (the button under the mouse) or make an open detail panel re-read.
const TICKING_FIELDS = new Set(['elapsed_s', 'elapsed_at', 'started', 'rev']);

/**
 * Keys whose items changed from `before` to `after` in more than their clock (a new state, size,
 * node list, reason, summary...), added or removed. A detail panel re-reads only those: each
 * re-read asks the cluster, and an update per poll for a running job's elapsed time would make
 * every open panel a poller.
 */
export function meaningfulChanges(before: State, after: State, keys: Iterable<string>): string[] {
  const out: string[] = [];
  for (const key of keys) {
    const a = before.items.get(key);
    const b = after.items.get(key);
    if (!a || !b) {
      if (a !== b) {
        out.push(key);
      }
      continue;
    }
    const names = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const name of names) {
      if (TICKING_FIELDS.has(name)) {
        continue;
      }
      const va = (a as unknown as Record<string, unknown>)[name];
      const vb = (b as unknown as Record<string, unknown>)[name];
      if (va !== vb && JSON.stringify(va) !== JSON.stringify(vb)) {
        out.push(key);
        break;
      }
    }
  }
  return out;
}

/**
 * What a list row draws of an item, as a string: two items with the same signature draw the same
 * row. The ticking fields are left out (the elapsed column is drawn by the local clock), so a
 * running job's update every poll leaves its row — and the Cancel button under the mouse — alone.
 */
export function rowSignature(item: Item): string {
  const drawn: Record<string, unknown> = { ...item };
  for (const name of TICKING_FIELDS) {
    delete drawn[name];
  }
  return JSON.stringify(drawn);
}

/** The state after a `GET jobs` answer: a snapshot plus its per-profile errors. */
export function fromList(
  items: Item[],
  errors: ProfileError[],
  now: number,
  rev?: number
): State {
  const state = reduce(EMPTY, { type: 'snapshot', items, rev }, now);
  return {
    ...state,
    errors: new Map(errors.map(e => [e.profile, e.message]))
  };
}

/** A `GET jobs` answer: its items, per-profile errors and the revision it is as of. */
export interface ListAnswer {
  items: Item[];
  errors?: ProfileError[];
  rev?: number;
}

/**
 * The state after a `GET jobs` answer that arrives while the `events` websocket keeps `state`
 * current: merged item by item, since the websocket may have delivered newer changes while the
 * request was in flight (a job's end, which nothing would correct later).
 *
 * - An item in both: the answer's replaces the held one unless the held one has the higher `rev`
 *   (an update that came after the answer was built); a tie goes to the answer (read later).
 * - An item only held: it stays if its `rev` is above the answer's (added or changed after the
 *   answer was built), else it goes (the answer was built after its last change and lacks it:
 *   removed on the server, or the server no longer lists it).
 * - An item only in the answer: added unless the state has heard of a revision above the
 *   answer's. Then it may be a removal that came after the answer (a `removed` message, which
 *   is not repeated); if it is instead new, the server's hub sends it as an update anyway.
 *
 * Without revisions (an older server) the answer replaces the state, as before.
 */
export function mergeList(state: State, answer: ListAnswer, now: number): State {
  const errors = new Map((answer.errors ?? []).map(e => [e.profile, e.message]));
  const at = revOf(answer.rev);
  if (at === undefined || state.rev === undefined) {
    return fromList(answer.items, answer.errors ?? [], now, at);
  }
  const items = new Map<string, Item>();
  const receivedAt = new Map<string, number>();
  const keep = (key: string, held: Item) => {
    items.set(key, held);
    receivedAt.set(key, state.receivedAt.get(key) ?? now);
  };
  // The answer's newest-first order for what it lists, then what only this state holds.
  for (const raw of answer.items) {
    const incoming = normalize(raw);
    const held = state.items.get(raw.key);
    if (held && newer(held.rev, incoming.rev)) {
      keep(raw.key, held);
    } else if (held || !(state.rev > at)) {
      items.set(raw.key, incoming);
      receivedAt.set(raw.key, now);
    }
  }
  for (const [key, held] of state.items) {
    if (!items.has(key) && newer(held.rev, at)) {
      keep(key, held);
    }
  }
  return { items, receivedAt, errors, loaded: true, rev: Math.max(state.rev, at) };
}

/** The sidebar's filters; an empty string means "any". */
export interface Filters {
  tier: string;
  state: string;
  profile: string;
  search: string;
}

export const NO_FILTERS: Filters = { tier: '', state: '', profile: '', search: '' };

/** Filter value of the state selector that keeps every item that has not ended. */
export const ACTIVE = '(active)';

/**
 * Whether an item passes the filters. The search matches, case-insensitively, every
 * whitespace-separated word against id, name, profile, tier, state, size, where and reason.
 */
export function matches(item: Item, f: Filters): boolean {
  if (f.tier && item.tier !== f.tier) {
    return false;
  }
  if (f.profile && item.profile !== f.profile) {
    return false;
  }
  if (f.state === ACTIVE ? item.terminal : f.state && item.state !== f.state) {
    return false;
  }
  const words = f.search.toLowerCase().split(/\s+/).filter(Boolean);
  if (words.length === 0) {
    return true;
  }
  const hay = [
    item.id,
    item.name,
    item.profile,
    item.tier,
    item.state,
    item.kind,
    item.size,
    item.where,
    item.reason
  ]
    .join(' ')
    .toLowerCase();
  return words.every(w => hay.includes(w));
}

/**
 * The rows to show, in order: items not ended first, then the newest submission (or start) first,
 * then by key (so the order is stable when nothing changed).
 */
export function visibleItems(state: State, f: Filters): Item[] {
  const rows = [...state.items.values()].filter(item => matches(item, f));
  return rows.sort((a, b) => {
    if (a.terminal !== b.terminal) {
      return a.terminal ? 1 : -1;
    }
    const sa = a.submitted ?? a.started ?? '';
    const sb = b.submitted ?? b.started ?? '';
    if (sa !== sb) {
      return sa < sb ? 1 : -1;
    }
    return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
  });
}

/** The distinct values of one field, sorted: the options of a filter selector. */
export function facet(state: State, field: 'tier' | 'state' | 'profile'): string[] {
  return [...new Set([...state.items.values()].map(i => i[field]))]
    .filter(Boolean)
    .sort();
}

/** States in which an item's elapsed time grows. */
const TICKING = new Set(['RUNNING', 'COMPLETING', 'READY', 'DEPLOYING', 'DEGRADED']);

/**
 * An item's elapsed seconds at `now` (ms): `elapsed_s` as received, plus the time since it was
 * received while the item is in a ticking state. null when the server gave none.
 */
export function elapsedAt(item: Item, receivedAt: number | undefined, now: number): number | null {
  if (item.elapsed_s === null) {
    return null;
  }
  if (item.terminal || !TICKING.has(item.state) || receivedAt === undefined) {
    return item.elapsed_s;
  }
  return item.elapsed_s + Math.max(0, Math.floor((now - receivedAt) / 1000));
}

/** Seconds as [D-]HH:MM:SS (the notebook widget's and Slurm's format); "" for null or bad input. */
export function formatElapsed(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds) || seconds < 0) {
    return '';
  }
  const s = Math.floor(seconds);
  const d = Math.floor(s / 86400);
  const hh = String(Math.floor((s % 86400) / 3600)).padStart(2, '0');
  const mm = String(Math.floor((s % 3600) / 60)).padStart(2, '0');
  const ss = String(s % 60).padStart(2, '0');
  return (d ? `${d}-` : '') + `${hh}:${mm}:${ss}`;
}

/** The coarse class of a state, for the badge's colour. */
export function stateClass(state: string): 'ok' | 'active' | 'waiting' | 'bad' | 'stopped' | 'other' {
  switch (state) {
    case 'COMPLETED':
    case 'READY':
      return 'ok';
    case 'RUNNING':
    case 'COMPLETING':
    case 'DEPLOYING':
      return 'active';
    case 'PENDING':
    case 'CONFIGURING':
    case 'REQUEUED':
    case 'SUSPENDED':
      return 'waiting';
    case 'FAILED':
    case 'NODE_FAIL':
    case 'OUT_OF_MEMORY':
    case 'BOOT_FAIL':
    case 'DEADLINE':
    case 'DEGRADED':
      return 'bad';
    case 'CANCELLED':
    case 'TIMEOUT':
    case 'PREEMPTED':
    case 'SCALED_DOWN':
    case 'DELETED':
      return 'stopped';
    default:
      return 'other';
  }
}

/** What the actions of an item are (the verbs the server accepts for its kind). */
export function actionsOf(item: Item): Verb[] {
  if (item.own === true) {
    return []; // the job this JupyterLab runs inside: cancelling it would stop the notebook
  }
  if (item.orphan === true) {
    return ['forget']; // its profile is gone: nothing can scale, cancel or delete it
  }
  if (item.kind === 'job') {
    return item.terminal ? [] : ['cancel'];
  }
  if (item.state === 'DELETED') {
    return [];
  }
  const canary: Verb[] = typeof item.canary === 'number' ? ['promote', 'rollback'] : [];
  return ['scale', 'restart', ...canary, 'delete'];
}

/** Delay (ms) before reconnect attempt `attempt` (0-based): doubling from 1 s, capped at 30 s. */
export function backoff(attempt: number): number {
  return Math.min(30_000, 1000 * 2 ** Math.max(0, Math.min(attempt, 15)));
}

/** Parses the replica count typed into the Scale dialog; an Error names what is allowed. */
export function parseReplicas(text: string, max = 1000): number {
  const t = text.trim();
  if (!/^\d+$/.test(t)) {
    throw new Error(`replicas must be a whole number from 0 to ${max}, not "${t.slice(0, 20)}"`);
  }
  const n = Number(t);
  if (n > max) {
    throw new Error(`replicas must be a whole number from 0 to ${max}, not ${t.slice(0, 20)}`);
  }
  return n;
}
