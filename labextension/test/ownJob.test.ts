import { describe, expect, it } from 'vitest';

import { OWN_NOTE, isOwn, ownNote } from '../src/ownJob';
import { EMPTY, Item, actionsOf, normalize, parseEvent, reduce, rowSignature } from '../src/state';

function item(over: Partial<Item> = {}): Item {
  return {
    key: 'cluster/4242',
    id: '4242',
    kind: 'job',
    name: 'ood-jupyter',
    profile: 'cluster',
    tier: 'slurm',
    state: 'RUNNING',
    terminal: false,
    size: 'this notebook',
    where: 'c17',
    reason: '',
    started: null,
    elapsed_s: null,
    summary: 'this notebook runs inside Slurm job 4242 on node c17',
    ...over
  };
}

describe('the job this JupyterLab runs inside', () => {
  it('is never offered Cancel, whatever its state', () => {
    expect(actionsOf(item({ own: true }))).toEqual([]);
    expect(actionsOf(item({ own: true, state: 'PENDING' }))).toEqual([]);
    expect(actionsOf(item())).toEqual(['cancel']); // without the mark: an ordinary job
    expect(actionsOf(item({ own: false }))).toEqual(['cancel']);
  });

  it('keeps the mark only when the server says a literal true', () => {
    const raw = (own: unknown): Item => ({ ...item(), own } as unknown as Item);
    expect(normalize(raw(true)).own).toBe(true);
    for (const bad of ['true', 1, null, undefined, {}]) {
      expect(normalize(raw(bad)).own).toBe(false);
      expect(isOwn(normalize(raw(bad)))).toBe(false);
      expect(actionsOf(normalize(raw(bad)))).toEqual(['cancel']);
    }
    expect(actionsOf(normalize(raw(true)))).toEqual([]);
    expect(isOwn(undefined)).toBe(false);
  });

  it('comes through the events socket marked, with its note or the default one', () => {
    const frame = JSON.stringify({
      type: 'snapshot',
      items: [{ ...item(), own: true, own_note: 'why not' }],
      errors: [],
      rev: 5
    });
    const message = parseEvent(frame);
    expect(message?.type).toBe('snapshot');
    const own = reduce(EMPTY, message!, 0).items.get('cluster/4242');
    expect(isOwn(own)).toBe(true);
    expect(own && ownNote(own)).toBe('why not');
    expect(own && actionsOf(own)).toEqual([]);
    expect(ownNote(normalize({ ...item(), own: true }))).toBe(OWN_NOTE);
    expect(normalize({ ...item(), own_note: 5 } as unknown as Item).own_note).toBe('');
  });

  it('redraws the row when the mark comes or goes', () => {
    expect(rowSignature(item({ own: true }))).not.toBe(rowSignature(item({ own: false })));
  });
});

describe('a row whose profile no longer exists (issue 41 item 3)', () => {
  it('offers only Forget, for a job and a service alike', () => {
    expect(actionsOf(item({ orphan: true }))).toEqual(['forget']);
    expect(actionsOf(item({ orphan: true, kind: 'service', state: 'UNKNOWN' }))).toEqual(['forget']);
  });
});
