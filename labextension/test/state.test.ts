import { describe, expect, it } from 'vitest';

import {
  ACTIVE,
  EMPTY,
  Item,
  NO_FILTERS,
  actionsOf,
  backoff,
  elapsedAt,
  facet,
  formatElapsed,
  fromList,
  matches,
  meaningfulChanges,
  parseEvent,
  parseReplicas,
  reduce,
  rowSignature,
  stateClass,
  visibleItems
} from '../src/state';

function item(over: Partial<Item> = {}): Item {
  const id = over.id ?? '41';
  const profile = over.profile ?? 'box';
  return {
    key: `${profile}/${id}`,
    id,
    kind: 'job',
    name: 'train',
    profile,
    tier: 'slurm',
    state: 'RUNNING',
    terminal: false,
    size: '4 ranks on 2 nodes',
    where: 'node[1-2]',
    reason: '',
    started: '2026-12-02T10:00:00',
    elapsed_s: 60,
    summary: '',
    ...over
  };
}

describe('reduce', () => {
  it('a snapshot replaces everything and marks the state loaded', () => {
    const before = reduce(EMPTY, { type: 'snapshot', items: [item({ id: '1' })] }, 0);
    const after = reduce(before, { type: 'snapshot', items: [item({ id: '2' })] }, 5);
    expect([...after.items.keys()]).toEqual(['box/2']);
    expect(after.loaded).toBe(true);
    expect(after.receivedAt.get('box/2')).toBe(5);
    expect(EMPTY.loaded).toBe(false);
  });

  it('an update changes or adds items without touching the others, and never mutates', () => {
    const s1 = reduce(EMPTY, { type: 'snapshot', items: [item({ id: '1' }), item({ id: '2' })] }, 0);
    const s2 = reduce(s1, { type: 'update', items: [item({ id: '2', state: 'COMPLETED', terminal: true }), item({ id: '3' })] }, 9);
    expect(s2.items.get('box/2')?.state).toBe('COMPLETED');
    expect(s2.items.get('box/1')).toBe(s1.items.get('box/1'));
    expect(s2.items.size).toBe(3);
    expect(s2.receivedAt.get('box/2')).toBe(9);
    expect(s2.receivedAt.get('box/1')).toBe(0);
    expect(s1.items.get('box/2')?.state).toBe('RUNNING');
    expect(s1.items.size).toBe(2);
  });

  it('removed drops keys; unknown keys leave the same state object', () => {
    const s1 = reduce(EMPTY, { type: 'snapshot', items: [item({ id: '1' }), item({ id: '2' })] }, 0);
    const s2 = reduce(s1, { type: 'removed', keys: ['box/1', 'nope/9'] }, 1);
    expect([...s2.items.keys()]).toEqual(['box/2']);
    expect(s2.receivedAt.has('box/1')).toBe(false);
    expect(reduce(s2, { type: 'removed', keys: ['nope/9'] }, 2)).toBe(s2);
  });

  it('an error is kept per profile until that profile updates', () => {
    const s1 = reduce(EMPTY, { type: 'error', profile: 'box', message: 'ssh: connection refused' }, 0);
    const s2 = reduce(s1, { type: 'error', profile: 'k8s', message: 'API down' }, 0);
    expect([...s2.errors.keys()].sort()).toEqual(['box', 'k8s']);
    const s3 = reduce(s2, { type: 'update', items: [item()] }, 1);
    expect([...s3.errors.keys()]).toEqual(['k8s']);
    expect(reduce(s3, { type: 'snapshot', items: [] }, 2).errors.size).toBe(0);
  });

  it('fills optional fields', () => {
    const raw = { key: 'box/1', id: '1', kind: 'job', profile: 'box', state: 'PENDING' } as unknown as Item;
    const s = reduce(EMPTY, { type: 'snapshot', items: [raw] }, 0);
    const got = s.items.get('box/1')!;
    expect(got.reason).toBe('');
    expect(got.elapsed_s).toBeNull();
    expect(got.terminal).toBe(false);
  });

  it('fromList keeps the per-profile errors of GET jobs', () => {
    const s = fromList([item()], [{ profile: 'far', message: 'cluster unreachable' }], 3);
    expect(s.loaded).toBe(true);
    expect(s.errors.get('far')).toBe('cluster unreachable');
    expect(s.items.size).toBe(1);
  });
});

describe('parseEvent', () => {
  it('accepts the four message types and drops malformed items', () => {
    const msg = parseEvent(JSON.stringify({ type: 'update', items: [item(), { key: 1 }, null] }));
    expect(msg?.type).toBe('update');
    expect(msg && 'items' in msg ? msg.items.length : -1).toBe(1);
    expect(parseEvent('{"type":"removed","keys":["a/1",2]}')).toEqual({ type: 'removed', keys: ['a/1'] });
    expect(parseEvent('{"type":"error","profile":"box","message":"down"}')).toEqual({
      type: 'error',
      profile: 'box',
      message: 'down'
    });
    expect(parseEvent('{"type":"snapshot","items":[]}')).toEqual({ type: 'snapshot', items: [] });
  });

  it('returns null for anything else', () => {
    for (const text of ['', 'not json', '[]', 'null', '5', '{"type":"hello"}', '{"type":"update"}', '{"type":"removed","keys":"x"}']) {
      expect(parseEvent(text)).toBeNull();
    }
  });

  it('never throws on random input (seeded fuzz)', () => {
    let seed = 8;
    const rand = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const atoms = ['{', '}', '[', ']', '"type"', ':', '"snapshot"', '"update"', '"removed"', '"error"', '"items"', '"keys"', ',', 'null', '1', '"x"', '{"key":"a/1","id":"1","kind":"job","profile":"a","state":"RUNNING"}'];
    let state = EMPTY;
    for (let i = 0; i < 3000; i++) {
      const n = 1 + Math.floor(rand() * 12);
      let text = '';
      for (let j = 0; j < n; j++) {
        text += atoms[Math.floor(rand() * atoms.length)];
      }
      const msg = parseEvent(text);
      if (msg) {
        state = reduce(state, msg, i);
      }
    }
    for (const it of state.items.values()) {
      expect(typeof it.key).toBe('string');
    }
  });
});

describe('filters and search', () => {
  const items = [
    item({ id: '1', state: 'RUNNING' }),
    item({ id: '2', state: 'PENDING', reason: 'Resources', elapsed_s: null }),
    item({ id: '3', state: 'COMPLETED', terminal: true, profile: 'hpc' }),
    item({ id: 'llama', kind: 'service', name: 'llama-svc', tier: 'kubernetes', profile: 'serving', state: 'READY', size: '2/3 ready', where: 'http://10.0.0.1:8000' })
  ];
  const state = reduce(EMPTY, { type: 'snapshot', items }, 0);
  const ids = (f = NO_FILTERS): string[] => visibleItems(state, f).map(i => i.id);

  it('no filter keeps everything, running before ended', () => {
    expect(ids()).toHaveLength(4);
    expect(ids().at(-1)).toBe('3');
  });

  it('filters by tier, state, profile and active', () => {
    expect(ids({ ...NO_FILTERS, tier: 'kubernetes' })).toEqual(['llama']);
    expect(ids({ ...NO_FILTERS, state: 'PENDING' })).toEqual(['2']);
    expect(ids({ ...NO_FILTERS, profile: 'hpc' })).toEqual(['3']);
    expect(ids({ ...NO_FILTERS, state: ACTIVE })).not.toContain('3');
    expect(ids({ ...NO_FILTERS, state: ACTIVE })).toHaveLength(3);
  });

  it('search matches every word, case-insensitively, over several fields', () => {
    expect(ids({ ...NO_FILTERS, search: 'resources' })).toEqual(['2']);
    expect(ids({ ...NO_FILTERS, search: 'LLAMA 10.0.0.1' })).toEqual(['llama']);
    expect(ids({ ...NO_FILTERS, search: 'llama pending' })).toEqual([]);
    expect(ids({ ...NO_FILTERS, search: '   ' })).toHaveLength(4);
    expect(matches(items[0], { ...NO_FILTERS, search: 'node[1-2]' })).toBe(true);
  });

  it('facets list the distinct values, sorted', () => {
    expect(facet(state, 'profile')).toEqual(['box', 'hpc', 'serving']);
    expect(facet(state, 'tier')).toEqual(['kubernetes', 'slurm']);
  });

  it('ordering is stable: newest start first, then key', () => {
    const s = reduce(EMPTY, { type: 'snapshot', items: [item({ id: 'b', started: 'x' }), item({ id: 'a', started: 'x' }), item({ id: 'c', started: 'y' })] }, 0);
    expect(visibleItems(s, NO_FILTERS).map(i => i.id)).toEqual(['c', 'a', 'b']);
  });
});

describe('elapsed', () => {
  it('formats like Slurm', () => {
    expect(formatElapsed(0)).toBe('00:00:00');
    expect(formatElapsed(65)).toBe('00:01:05');
    expect(formatElapsed(3600 * 25 + 1)).toBe('1-01:00:01');
    expect(formatElapsed(59.9)).toBe('00:00:59');
    expect(formatElapsed(null)).toBe('');
    expect(formatElapsed(-1)).toBe('');
    expect(formatElapsed(NaN)).toBe('');
  });

  it('ticks locally only while running', () => {
    const running = item({ elapsed_s: 60 });
    expect(elapsedAt(running, 1000, 1000)).toBe(60);
    expect(elapsedAt(running, 1000, 6500)).toBe(65);
    expect(elapsedAt(running, 1000, 0)).toBe(60); // a clock going back never shrinks it
    expect(elapsedAt(item({ state: 'PENDING', elapsed_s: 0 }), 0, 10_000)).toBe(0);
    expect(elapsedAt(item({ state: 'COMPLETED', terminal: true }), 0, 10_000)).toBe(60);
    expect(elapsedAt(item({ elapsed_s: null }), 0, 10_000)).toBeNull();
  });
});

describe('actions, badges, back-off, replicas', () => {
  it('offers cancel for live jobs and scale/restart/delete for services', () => {
    expect(actionsOf(item())).toEqual(['cancel']);
    expect(actionsOf(item({ terminal: true, state: 'COMPLETED' }))).toEqual([]);
    expect(actionsOf(item({ kind: 'service', state: 'READY' }))).toEqual(['scale', 'restart', 'delete']);
    expect(actionsOf(item({ kind: 'service', state: 'DELETED', terminal: true }))).toEqual([]);
    // a live canary adds its two verbs, before Delete
    expect(actionsOf(item({ kind: 'service', state: 'READY', canary: 10 }))).toEqual([
      'scale',
      'restart',
      'promote',
      'rollback',
      'delete'
    ]);
    expect(actionsOf(item({ kind: 'service', state: 'READY', canary: null }))).toEqual([
      'scale',
      'restart',
      'delete'
    ]);
  });

  it('classes states for the badge', () => {
    expect(stateClass('COMPLETED')).toBe('ok');
    expect(stateClass('FAILED')).toBe('bad');
    expect(stateClass('PENDING')).toBe('waiting');
    expect(stateClass('CANCELLED')).toBe('stopped');
    expect(stateClass('WHATEVER')).toBe('other');
  });

  it('backs off from 1 s doubling to at most 30 s', () => {
    expect([0, 1, 2, 3, 4, 5, 6, 100].map(backoff)).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
    expect(backoff(-3)).toBe(1000);
  });

  it('parses replica counts and names what is allowed', () => {
    expect(parseReplicas(' 3 ')).toBe(3);
    expect(parseReplicas('0')).toBe(0);
    for (const bad of ['', '-1', '2.5', 'three', '1e3', '1001']) {
      expect(() => parseReplicas(bad)).toThrow(/whole number from 0 to 1000/);
    }
  });
});

describe('meaningfulChanges', () => {
  it('ignores the clock, reports state changes, additions and removals', () => {
    const s1 = reduce(EMPTY, { type: 'snapshot', items: [item({ id: '1' }), item({ id: '2' })] }, 0);
    const ticked = reduce(s1, { type: 'update', items: [item({ id: '1', elapsed_s: 63, started: 'later' })] }, 3);
    expect(meaningfulChanges(s1, ticked, ['box/1'])).toEqual([]);
    const ended = reduce(ticked, { type: 'update', items: [item({ id: '1', state: 'COMPLETED', terminal: true }), item({ id: '3' })] }, 4);
    expect(meaningfulChanges(ticked, ended, ['box/1', 'box/3'])).toEqual(['box/1', 'box/3']);
    const gone = reduce(ended, { type: 'removed', keys: ['box/2'] }, 5);
    expect(meaningfulChanges(ended, gone, ['box/2', 'box/9'])).toEqual(['box/2']);
    const moved = reduce(s1, { type: 'update', items: [item({ id: '2', where: 'node[3-4]' })] }, 6);
    expect(meaningfulChanges(s1, moved, ['box/2'])).toEqual(['box/2']);
  });
});

describe('parseReplicas fuzz', () => {
  it('either returns a whole number in 0-1000 or throws the sentence (seeded)', () => {
    let seed = 1234;
    const rand = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const chars = '0123456789 -+.eE,x\t\n٣';
    for (let i = 0; i < 5000; i++) {
      let text = '';
      const n = Math.floor(rand() * 7);
      for (let j = 0; j < n; j++) {
        text += chars[Math.floor(rand() * chars.length)];
      }
      let value: number | null = null;
      try {
        value = parseReplicas(text);
      } catch (err) {
        expect((err as Error).message).toMatch(/^replicas must be a whole number from 0 to 1000/);
        continue;
      }
      expect(Number.isInteger(value)).toBe(true);
      expect(value).toBeGreaterThanOrEqual(0);
      expect(value).toBeLessThanOrEqual(1000);
      expect(String(value)).toBe(text.trim().replace(/^0+(?=\d)/, ''));
    }
  });
});

describe('rowSignature', () => {
  it('is the same when only the ticking fields changed (an update per poll redraws nothing)', () => {
    const a = item({ elapsed_s: 60, started: '2026-12-02T10:00:00' });
    expect(rowSignature(item({ elapsed_s: 61 }))).toBe(rowSignature(a));
    expect(rowSignature(item({ elapsed_s: null, started: null }))).toBe(rowSignature(a));
  });

  it('differs when anything the row draws changed', () => {
    const a = rowSignature(item());
    for (const over of [
      { state: 'COMPLETED' },
      { terminal: true },
      { size: '2/2 ready' },
      { where: 'node3' },
      { reason: 'Priority' },
      { summary: 'done' },
      { name: 'other' }
    ] as Array<Partial<Item>>) {
      expect(rowSignature(item(over))).not.toBe(a);
    }
  });
});
