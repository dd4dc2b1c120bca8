// A websocket that reconnects with exponential back-off and jitter (never a tight loop, and tabs
// that lost the same server do not all come back in step), and hands each text frame to
// a callback. The socket factory, timers and randomness are injected so the logic is tested without
// a server.

import { backoff } from './state';

export interface SocketLike {
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: unknown) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  close(): void;
  send?(data: string): void;
}

export interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const REAL_TIMERS: Timers = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: handle => clearTimeout(handle as ReturnType<typeof setTimeout>)
};

export interface ReconnectingOptions {
  /** The URL to (re)connect to: asked at each attempt, so it can carry a resume offset. */
  url: () => string;
  onMessage: (text: string) => void;
  /** Connected (true) or lost (false); `attempt` is the number of failures in a row, `nextMs`
   * the wait before the next try (0 when connected). */
  onStatus?: (connected: boolean, attempt: number, nextMs: number) => void;
  connect?: (url: string) => SocketLike;
  timers?: Timers;
  /** A number in [0, 1) (default Math.random): where in its jitter range a delay falls. */
  random?: () => number;
}

/** The share of a delay that jitter may take off (as the kernel side's reachability.py). */
export const JITTER = 0.2;

/** The wait before retry number `attempt` (0-based): the back-off, less a random fraction
 * (`r` in [0, 1)) of up to JITTER of it, so it stays within [0.8 backoff, backoff]. */
export function jittered(attempt: number, r: number): number {
  const x = Number.isFinite(r) ? Math.min(1, Math.max(0, r)) : 0;
  return Math.round(backoff(attempt) * (1 - JITTER * x));
}

/** What a panel says about its connection, in the words of the notebook widgets
 * (reachability.py): nothing while connected; while not, which try is next and in how long
 * (`msLeft`, rounded to seconds); "connecting" until the first connection, then "reconnecting". */
export function connectionText(
  connected: boolean,
  attempt: number,
  everConnected: boolean,
  msLeft: number
): string {
  if (connected) {
    return '';
  }
  const verb = everConnected ? 'reconnecting' : 'connecting';
  if (attempt < 1) {
    return `${verb}…`;
  }
  const secs = Math.max(0, Math.round(msLeft / 1000));
  return `${verb} (attempt ${attempt}, next in ${secs} s)…`;
}

export class ReconnectingSocket {
  constructor(private readonly opts: ReconnectingOptions) {
    this._open();
  }

  get connected(): boolean {
    return this._connected;
  }

  /** Failed attempts since the last successful connection. */
  get attempt(): number {
    return this._attempt;
  }

  /** Successful connections so far (the first one included). */
  get connections(): number {
    return this._connections;
  }

  /** Closes now and reconnects at once (e.g. a Refresh). */
  reconnect(): void {
    if (this._closed) {
      return;
    }
    this._attempt = 0;
    this._drop();
    this._open();
  }

  /** Sends a text frame when connected (false when not: the caller may ask again later). */
  send(text: string): boolean {
    if (!this._connected || !this._ws?.send) {
      return false;
    }
    try {
      this._ws.send(text);
      return true;
    } catch {
      return false;
    }
  }

  close(): void {
    this._closed = true;
    this._drop();
  }

  private _drop(): void {
    const timers = this.opts.timers ?? REAL_TIMERS;
    if (this._timer !== null) {
      timers.clear(this._timer);
      this._timer = null;
    }
    const ws = this._ws;
    this._ws = null;
    if (ws) {
      ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
      ws.close();
    }
    this._connected = false;
  }

  private _open(): void {
    const connect = this.opts.connect ?? ((url: string) => new WebSocket(url) as unknown as SocketLike);
    let ws: SocketLike;
    try {
      ws = connect(this.opts.url());
    } catch {
      this._retry();
      return;
    }
    this._ws = ws;
    ws.onopen = () => {
      this._connected = true;
      this._attempt = 0;
      this._connections += 1;
      this.opts.onStatus?.(true, 0, 0);
    };
    ws.onmessage = ev => {
      if (typeof ev.data === 'string') {
        this.opts.onMessage(ev.data);
      }
    };
    ws.onerror = () => {
      // onclose follows and schedules the retry
    };
    ws.onclose = () => {
      if (this._ws !== ws) {
        return;
      }
      this._ws = null;
      this._connected = false;
      this._retry();
    };
  }

  private _retry(): void {
    if (this._closed) {
      return;
    }
    const delay = jittered(this._attempt, (this.opts.random ?? Math.random)());
    this._attempt += 1;
    this.opts.onStatus?.(false, this._attempt, delay);
    const timers = this.opts.timers ?? REAL_TIMERS;
    this._timer = timers.set(() => {
      this._timer = null;
      this._open();
    }, delay);
  }

  private _ws: SocketLike | null = null;
  private _timer: unknown = null;
  private _attempt = 0;
  private _connections = 0;
  private _connected = false;
  private _closed = false;
}
