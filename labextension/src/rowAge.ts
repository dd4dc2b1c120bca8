// A list row's age column (pure: no DOM). It ticks locally, once a second, for every state until
// the item's state is final: a running job's run time, a service's age, and a waiting job's time
// in the queue (since it was submitted: its run time stays 0 while it waits).

import { Item, formatElapsed } from './state';

/** States in which a job waits for the scheduler: its age is its time in the queue. */
const WAITING = new Set(['PENDING', 'CONFIGURING', 'REQUEUED', 'SUSPENDED']);

/** What the age column shows: the text, a tooltip saying what it counts, and which kind. */
export interface Age {
  text: string;
  title: string;
  kind: 'final' | 'running' | 'waiting' | 'none';
}

/** Seconds since an ISO-8601 time at `wallNow` (ms since the epoch); null if it does not parse. */
function since(iso: string | null | undefined, wallNow: number): number | null {
  const at = iso ? Date.parse(iso) : NaN;
  return Number.isFinite(at) ? Math.max(0, Math.floor((wallNow - at) / 1000)) : null;
}

/**
 * The server's clock on this page: set once from the first snapshot's `server_time` (the offset
 * to the page's clock applied once), then read off the page's monotonic clock, so ages neither
 * jump with the browser's wall clock nor differ from the server's by its skew.
 */
export class ServerClock {
  private _at: { server: number; mono: number } | null = null;

  /** Sets the clock from a server time (epoch seconds) seen at `mono` (ms); only the first counts. */
  set(serverTime: number | undefined, mono: number): void {
    if (this._at === null && serverTime !== undefined && Number.isFinite(serverTime)) {
      this._at = { server: serverTime * 1000, mono };
    }
  }

  /** The server's wall clock now (ms since the epoch); the page's until it was set. */
  now(mono: number, wall: number): number {
    return this._at === null ? wall : this._at.server + (mono - this._at.mono);
  }
}

/**
 * The age of `item`: `receivedAt` and `monoNow` are on the page's monotonic clock (when its
 * `elapsed_s` arrived, and now), `wallNow` is the server's wall clock as the page knows it
 * (ServerClock: for a waiting job's submission time, and for `elapsed_at`, when `elapsed_s` was
 * true). A row re-sent unchanged (a snapshot, a list answer) keeps its age: it ticks from
 * `elapsed_at`, not from when the row arrived.
 */
export function ageOf(item: Item, receivedAt: number | undefined, monoNow: number, wallNow: number): Age {
  const what = item.kind === 'job' ? 'ran' : 'existed';
  if (item.terminal) {
    const text = formatElapsed(item.elapsed_s);
    return text
      ? { text, title: `${item.state}: ${what} for ${text} (final)`, kind: 'final' }
      : { text: '', title: '', kind: 'none' };
  }
  if (item.kind === 'job' && WAITING.has(item.state) && !item.elapsed_s) {
    const waited = since(item.submitted, wallNow);
    if (waited !== null) {
      const text = formatElapsed(waited);
      return { text, title: `${item.state}: waiting for ${text} since it was submitted`, kind: 'waiting' };
    }
  }
  if (item.elapsed_s === null) {
    const age = since(item.submitted ?? item.started, wallNow);
    if (age === null) {
      return { text: '', title: '', kind: 'none' };
    }
    const text = formatElapsed(age);
    return { text, title: `${item.state}: ${text} since it was submitted`, kind: 'running' };
  }
  // Every state that is not final ticks (state.ts's elapsedAt ticks only those whose run time
  // grows; a row's age must not stand still under UNKNOWN, a failed rollout or SCALED_DOWN).
  const since_s =
    typeof item.elapsed_at === 'number'
      ? (wallNow - item.elapsed_at * 1000) / 1000
      : receivedAt === undefined
        ? 0
        : (monoNow - receivedAt) / 1000;
  const ticked = item.elapsed_s + Math.max(0, Math.floor(since_s));
  const text = formatElapsed(ticked);
  return { text, title: `${item.state}: ${item.kind === 'job' ? 'running' : 'up'} for ${text}`, kind: 'running' };
}
