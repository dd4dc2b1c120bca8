import { describe, expect, it } from 'vitest';

import { ReconnectingSocket, SocketLike, Timers } from '../src/socket';

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

function setup(offset = { value: 0 }) {
  const sockets: FakeSocket[] = [];
  const timers = new FakeTimers();
  const got: string[] = [];
  const status: Array<[boolean, number]> = [];
  const rs = new ReconnectingSocket({
    url: () => `ws://x/events?offset=${offset.value}`,
    onMessage: t => got.push(t),
    onStatus: (c, a) => status.push([c, a]),
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
    expect(status.at(-1)).toEqual([true, 0]);
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
});
