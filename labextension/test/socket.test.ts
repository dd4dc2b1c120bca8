import { describe, expect, it } from 'vitest';

import { ReconnectingSocket, SocketLike, Timers, connectionText, jittered } from '../src/socket';

class FakeSocket implements SocketLike {
  constructor(readonly url: string) {}
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: unknown) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  closed = false;
  close(): void {
    this.closed = true;
  }
}

class FakeTimers implements Timers {
  pending: Array<{ fn: () => void; ms: number; id: number }> = [];
  next = 1;
  set(fn: () => void, ms: number): unknown {
    const id = this.next++;
    this.pending.push({ fn, ms, id });
    return id;
  }
  clear(handle: unknown): void {
    this.pending = this.pending.filter(t => t.id !== handle);
  }
  fire(): number {
    const t = this.pending.shift()!;
    t.fn();
    return t.ms;
  }
}

function setup(offset = { value: 0 }, random = () => 0) {
  const sockets: FakeSocket[] = [];
  const timers = new FakeTimers();
  const got: string[] = [];
  const status: Array<[boolean, number, number]> = [];
  const rs = new ReconnectingSocket({
    url: () => `ws://x/events?offset=${offset.value}`,
    onMessage: t => got.push(t),
    onStatus: (c, a, n) => status.push([c, a, n]),
    random,
    connect: url => {
      const s = new FakeSocket(url);
      sockets.push(s);
      return s;
    },
    timers
  });
  return { rs, sockets, timers, got, status };
}

describe('ReconnectingSocket', () => {
  it('delivers text frames and ignores others', () => {
    const { sockets, got, rs } = setup();
    sockets[0].onopen!({});
    sockets[0].onmessage!({ data: 'a' });
    sockets[0].onmessage!({ data: new ArrayBuffer(2) });
    expect(got).toEqual(['a']);
    expect(rs.connected).toBe(true);
  });

  it('reconnects with doubling delays, resets them after a success, and resumes at the offset', () => {
    const offset = { value: 0 };
    const { sockets, timers, status } = setup(offset);
    const delays: number[] = [];
    for (let i = 0; i < 4; i++) {
      sockets.at(-1)!.onclose!({});
      delays.push(timers.fire());
    }
    expect(delays).toEqual([1000, 2000, 4000, 8000]);
    expect(sockets).toHaveLength(5);
    sockets.at(-1)!.onopen!({});
    expect(status.at(-1)).toEqual([true, 0, 0]);
    offset.value = 42;
    sockets.at(-1)!.onclose!({});
    expect(timers.fire()).toBe(1000);
    expect(sockets.at(-1)!.url).toBe('ws://x/events?offset=42');
  });

  it('close stops everything: no timer, no further socket', () => {
    const { rs, sockets, timers } = setup();
    sockets[0].onclose!({});
    expect(timers.pending).toHaveLength(1);
    rs.close();
    expect(timers.pending).toHaveLength(0);
    expect(sockets).toHaveLength(1);
  });

  it('reconnect() replaces the socket at once and ignores the old one closing', () => {
    const { rs, sockets, timers } = setup();
    const old = sockets[0];
    rs.reconnect();
    expect(old.closed).toBe(true);
    expect(sockets).toHaveLength(2);
    expect(timers.pending).toHaveLength(0);
  });

  it('a connect that throws is retried later, not in a loop', () => {
    const timers = new FakeTimers();
    let calls = 0;
    new ReconnectingSocket({
      url: () => 'ws://x',
      onMessage: () => undefined,
      random: () => 0,
      connect: () => {
        calls++;
        throw new Error('bad url');
      },
      timers
    });
    expect(calls).toBe(1);
    expect(timers.pending.map(t => t.ms)).toEqual([1000]);
    timers.fire();
    expect(calls).toBe(2);
    expect(timers.pending.map(t => t.ms)).toEqual([2000]);
  });

  it('counts successful connections only: a server restart is one more, its failed tries none', () => {
    const { rs, sockets, timers, status } = setup();
    sockets[0].onopen!({});
    expect(rs.connections).toBe(1);
    sockets[0].onclose!({}); // the server went away
    for (let i = 0; i < 3; i++) {
      timers.fire();
      sockets.at(-1)!.onclose!({}); // refused while it is down
    }
    expect(rs.connections).toBe(1);
    expect(status.at(-1)).toEqual([false, 4, 8000]); // the next wait is told, as scheduled
    expect(timers.pending.map(t => t.ms)).toEqual([8000]);
    timers.fire();
    sockets.at(-1)!.onopen!({});
    expect(rs.connections).toBe(2);
    expect(rs.attempt).toBe(0);
    expect(timers.pending).toHaveLength(0);
    expect(sockets.filter(s => !s.closed && s.onopen !== null)).toHaveLength(sockets.length);
  });

  it('jitters each delay within [0.8, 1] of the back-off, so tabs do not retry in step', () => {
    const a = setup({ value: 0 }, () => 0.1);
    const b = setup({ value: 0 }, () => 0.9);
    a.sockets[0].onclose!({});
    b.sockets[0].onclose!({});
    const [da, db] = [a.timers.pending[0].ms, b.timers.pending[0].ms];
    expect(da).not.toBe(db);
    for (const d of [da, db]) {
      expect(d).toBeGreaterThanOrEqual(800);
      expect(d).toBeLessThanOrEqual(1000);
    }
  });
});

describe('jittered', () => {
  it('stays within [0.8 backoff, backoff], whatever the random number', () => {
    for (const attempt of [0, 1, 3, 5, 40]) {
      const full = Math.min(30_000, 1000 * 2 ** Math.min(attempt, 15));
      for (const r of [0, 0.25, 0.5, 0.999, -1, 7, NaN]) {
        const d = jittered(attempt, r);
        expect(d).toBeGreaterThanOrEqual(full * 0.8);
        expect(d).toBeLessThanOrEqual(full);
      }
    }
    expect(jittered(0, 0)).toBe(1000);
    expect(jittered(2, 0.5)).toBe(3600);
  });
});

describe('connectionText', () => {
  it('says nothing while connected, and which try comes when while not', () => {
    expect(connectionText(true, 0, true, 0)).toBe('');
    expect(connectionText(false, 0, false, 0)).toBe('connecting…');
    expect(connectionText(false, 2, false, 1600)).toBe('connecting (attempt 2, next in 2 s)…');
    expect(connectionText(false, 3, true, 7800)).toBe('reconnecting (attempt 3, next in 8 s)…');
    expect(connectionText(false, 1, true, -40)).toBe('reconnecting (attempt 1, next in 0 s)…');
  });
});
