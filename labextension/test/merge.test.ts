// The Refresh button's `GET jobs` answer merged with what the `events` websocket delivered while
// it was in flight: by the server's per-item revisions, never a blind replace.
import { describe, expect, it } from 'vitest';

import { EMPTY, Item, State, meaningfulChanges, mergeList, reduce, rowSignature } from '../src/state';

function item(id: string, state: string, rev: number): Item {
  return {
    key: `box/${id}`,
    id,
    kind: 'job',
    name: 'train',
    profile: 'box',
    tier: 'slurm',
    state,
    terminal: state === 'COMPLETED',
    size: '1 rank',
    where: 'node1',
    reason: '',
    started: null,
    elapsed_s: 5,
    summary: '',
    rev
  };
}

function live(items: Item[], rev: number): State {
  return reduce(EMPTY, { type: 'snapshot', items, rev }, 0);
}

describe('mergeList', () => {
  it('an older answer does not overwrite an update that came while it was in flight', () => {
    // Snapshot at rev 10; the GET is built at rev 10; the job's end arrives as rev 11 first.
    let state = live([item('1', 'RUNNING', 10)], 10);
    state = reduce(state, { type: 'update', items: [item('1', 'COMPLETED', 11)] }, 1);
    const merged = mergeList(state, { items: [item('1', 'RUNNING', 10)], errors: [], rev: 10 }, 2);
    expect(merged.items.get('box/1')?.state).toBe('COMPLETED');
    expect(merged.items.get('box/1')?.rev).toBe(11);
  });

  it('a newer answer replaces the held item', () => {
    const state = live([item('1', 'RUNNING', 10)], 10);
    const merged = mergeList(state, { items: [item('1', 'COMPLETED', 12)], errors: [], rev: 12 }, 2);
    expect(merged.items.get('box/1')?.state).toBe('COMPLETED');
    expect(merged.items.get('box/1')?.elapsed_s).toBe(5);
    expect(merged.rev).toBe(12);
  });

  it('a tie goes to the answer (read after that change)', () => {
    const state = live([item('1', 'RUNNING', 10)], 10);
    const answered = { ...item('1', 'RUNNING', 10), where: 'node2' };
    const merged = mergeList(state, { items: [answered], errors: [], rev: 10 }, 2);
    expect(merged.items.get('box/1')?.where).toBe('node2');
  });

  it('a held item the answer lacks goes unless it changed after the answer was built', () => {
    const state = live([item('old', 'RUNNING', 5), item('new', 'PENDING', 11)], 11);
    const merged = mergeList(state, { items: [], errors: [], rev: 10 }, 2);
    expect(merged.items.has('box/old')).toBe(false); // removed on the server
    expect(merged.items.has('box/new')).toBe(true); // added by the socket after the answer
    expect(merged.receivedAt.get('box/new')).toBe(0);
  });

  it('an answer item removed by a later removal message stays removed', () => {
    let state = live([item('1', 'RUNNING', 10)], 10);
    state = reduce(state, { type: 'removed', keys: ['box/1'], rev: 11 }, 1);
    const merged = mergeList(state, { items: [item('1', 'RUNNING', 10)], errors: [], rev: 10 }, 2);
    expect(merged.items.has('box/1')).toBe(false);
  });

  it('an answer item the state never heard of is added when no later news came', () => {
    const state = live([], 10);
    const merged = mergeList(state, { items: [item('2', 'PENDING', 12)], errors: [], rev: 12 }, 2);
    expect(merged.items.get('box/2')?.state).toBe('PENDING');
  });

  it('keeps the answer errors and, without revisions (an older server), replaces as before', () => {
    const state = live([item('1', 'COMPLETED', 11)], 11);
    const old = { ...item('1', 'RUNNING', 0), rev: undefined };
    const merged = mergeList(state, { items: [old], errors: [{ profile: 'box', message: 'down' }] }, 2);
    expect(merged.items.get('box/1')?.state).toBe('RUNNING');
    expect(merged.errors.get('box')).toBe('down');
    expect(merged.loaded).toBe(true);
  });
});

describe('reduce with revisions', () => {
  it('an update older than the held item (an answer applied first) is ignored', () => {
    const state = live([item('1', 'COMPLETED', 12)], 12);
    const after = reduce(state, { type: 'update', items: [item('1', 'RUNNING', 11)] }, 1);
    expect(after.items.get('box/1')?.state).toBe('COMPLETED');
  });

  it('a removal older than the held item leaves it', () => {
    const state = live([item('1', 'RUNNING', 12)], 12);
    const after = reduce(state, { type: 'removed', keys: ['box/1'], rev: 11 }, 1);
    expect(after.items.has('box/1')).toBe(true);
    const later = reduce(state, { type: 'removed', keys: ['box/1'], rev: 13 }, 1);
    expect(later.items.has('box/1')).toBe(false);
  });
});

describe('revisions are bookkeeping', () => {
  it('a new rev alone is no meaningful change and draws the same row', () => {
    const state = live([item('1', 'RUNNING', 10)], 10);
    const after = reduce(state, { type: 'update', items: [{ ...item('1', 'RUNNING', 11), elapsed_s: 6 }] }, 1);
    expect(meaningfulChanges(state, after, ['box/1'])).toEqual([]);
    expect(rowSignature(after.items.get('box/1')!)).toBe(rowSignature(state.items.get('box/1')!));
  });
});
