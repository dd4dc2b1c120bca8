import { describe, expect, it } from 'vitest';

import { ServerClock, ageOf } from '../src/rowAge';
import { Item } from '../src/state';

function item(over: Partial<Item> = {}): Item {
  return {
    key: 'box/41',
    id: '41',
    kind: 'job',
    name: 'train',
    profile: 'box',
    tier: 'slurm',
    state: 'RUNNING',
    terminal: false,
    size: '4 ranks',
    where: 'c1',
    reason: '',
    started: null,
    elapsed_s: 60,
    summary: '',
    submitted: '2026-12-06T10:00:00+00:00',
    ...over
  };
}

const SUBMITTED = Date.parse('2026-12-06T10:00:00+00:00');

describe('ageOf (issue 29 §10: ages tick for every state until it is final)', () => {
  it('ticks a running job from its received elapsed time', () => {
    expect(ageOf(item(), 1000, 1000, 0).text).toBe('00:01:00');
    expect(ageOf(item(), 1000, 6500, 0).text).toBe('00:01:05');
    expect(ageOf(item(), 1000, 0, 0).text).toBe('00:01:00'); // a clock going back never shrinks it
  });

  it('ticks a pending job by its time in the queue, from its submission', () => {
    const pending = item({ state: 'PENDING', elapsed_s: 0 });
    const a = ageOf(pending, 0, 0, SUBMITTED + 90_000);
    expect(a).toMatchObject({ text: '00:01:30', kind: 'waiting' });
    expect(a.title).toContain('waiting');
    expect(ageOf(pending, 0, 0, SUBMITTED + 95_000).text).toBe('00:01:35');
  });

  it('ticks every state that is not final, services included', () => {
    for (const state of ['UNKNOWN', 'FAILED', 'SCALED_DOWN', 'DEGRADED', 'READY', 'DEPLOYING']) {
      const svc = item({ kind: 'service', state, elapsed_s: 10 });
      expect(ageOf(svc, 0, 5000, 0).text).toBe('00:00:15');
    }
  });

  it('stands still once the state is final', () => {
    const done = item({ state: 'FAILED', terminal: true, elapsed_s: 75 });
    const a = ageOf(done, 0, 1_000_000, SUBMITTED + 1e9);
    expect(a).toMatchObject({ text: '00:01:15', kind: 'final' });
    expect(a.title).toContain('final');
    expect(ageOf(item({ terminal: true, state: 'DELETED', elapsed_s: null }), 0, 5000, 0).text).toBe('');
  });

  it('falls back to the submission time when no elapsed time came', () => {
    const a = ageOf(item({ elapsed_s: null }), 0, 0, SUBMITTED + 3_600_000);
    expect(a.text).toBe('01:00:00');
    expect(ageOf(item({ elapsed_s: null, submitted: 'garbage' }), 0, 0, 0).text).toBe('');
  });

  it('never shows a negative or broken age (seeded fuzz)', () => {
    let seed = 2911;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const states = ['PENDING', 'RUNNING', 'UNKNOWN', 'COMPLETED', 'READY', 'REQUEUED'];
    for (let i = 0; i < 2000; i++) {
      const it = item({
        state: states[Math.floor(rnd() * states.length)],
        terminal: rnd() < 0.3,
        elapsed_s: rnd() < 0.2 ? null : Math.floor(rnd() * 1e6),
        submitted: rnd() < 0.2 ? 'x' : new Date(SUBMITTED + (rnd() - 0.5) * 1e9).toISOString()
      });
      const a = ageOf(it, rnd() < 0.1 ? undefined : rnd() * 1e6, rnd() * 1e6, SUBMITTED + (rnd() - 0.5) * 1e9);
      expect(a.text === '' || /^(\d+-)?\d\d:\d\d:\d\d$/.test(a.text)).toBe(true);
    }
  });
});

describe('one clock for ages (issue 41 §8: an age ran backwards, 00:01:53 then 00:01:28)', () => {
  it('a row sent again unchanged keeps its age: it ticks from when the server measured it', () => {
    const measured = SUBMITTED / 1000 + 88; // the server measured 88 s at this moment
    const row = item({ elapsed_s: 88, elapsed_at: measured });
    const clock = new ServerClock();
    clock.set(measured + 25, 5_000); // the first snapshot: 25 s after the row was measured
    const at = (mono: number) => ageOf(row, mono, mono, clock.now(mono, 0)).text;
    expect(at(5_000)).toBe('00:01:53');
    // Four minutes later a list answer re-sends the same cached row (received now): still ticking.
    expect(at(245_000)).toBe('00:05:53');
  });

  it('the offset is applied once, and the page wall clock does not move ages', () => {
    const clock = new ServerClock();
    expect(clock.now(10, 1234)).toBe(1234); // not set: the page's
    clock.set(1000, 0);
    clock.set(5000, 10); // a later snapshot does not reset it
    expect(clock.now(2000, 99_999_999)).toBe(1_002_000);
  });

  it('a row without elapsed_at (an older server) ticks from when it arrived, as before', () => {
    expect(ageOf(item(), 1000, 6500, 0).text).toBe('00:01:05');
  });
});
