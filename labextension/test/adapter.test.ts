import { describe, expect, it } from 'vitest';

import { JOB_DEFAULTS, ViewModel, ViewRequest, streamTraits, toRows } from '../src/adapter';

describe('ViewModel', () => {
  it('starts from the defaults and fires change events only for changed traits', () => {
    const model = new ViewModel(JOB_DEFAULTS, () => undefined);
    expect(model.get('state')).toBe('PENDING');
    const seen: string[] = [];
    model.on('change:state', () => seen.push(`state=${model.get('state')}`));
    model.on('change:ranks', () => seen.push(`ranks=${JSON.stringify(model.get('ranks'))}`));
    model.update({ state: 'RUNNING', ranks: [['r', 'n1', null, null]] });
    model.update({ state: 'RUNNING', ranks: [['r', 'n1', null, null]] }); // same values: silent
    model.update({ ranks: [['x', 'n1', 0, null]] });
    expect(seen).toEqual(['state=RUNNING', 'ranks=[["r","n1",null,null]]', 'ranks=[["x","n1",0,null]]']);
  });

  it('sets every trait of an update before the first change event fires', () => {
    const model = new ViewModel(JOB_DEFAULTS, () => undefined);
    let seenTerminal: unknown;
    model.on('change:state', () => (seenTerminal = model.get('terminal')));
    model.update({ state: 'COMPLETED', terminal: true });
    expect(seenTerminal).toBe(true);
  });

  it('set fires a change, save_changes is harmless, off removes handlers', () => {
    const model = new ViewModel({ a: 1 }, () => undefined);
    let n = 0;
    const cb = (): void => {
      n++;
    };
    model.on('change:a', cb);
    model.set('a', 2);
    model.set('a', 2);
    model.save_changes();
    model.off('change:a', cb);
    model.set('a', 3);
    expect(n).toBe(1);
    model.on('change:a', cb);
    model.off('change:a');
    model.set('a', 4);
    model.on('change:a', cb);
    model.off();
    model.set('a', 5);
    expect(n).toBe(1);
  });

  it('hands the view requests to the panel and delivers custom messages', () => {
    const sent: ViewRequest[] = [];
    const model = new ViewModel(JOB_DEFAULTS, r => sent.push(r));
    const got: unknown[] = [];
    model.on('msg:custom', msg => got.push(msg));
    model.send({ kind: 'cancel' });
    model.send('not an object');
    model.send([1, 2]);
    model.custom({ kind: 'lines', lines: [] });
    expect(sent).toEqual([{ kind: 'cancel' }]);
    expect(got).toEqual([{ kind: 'lines', lines: [] }]);
    model.dispose();
    model.send({ kind: 'cancel' });
    model.custom({ kind: 'lines', lines: [] });
    expect(sent).toHaveLength(1);
    expect(got).toHaveLength(1);
  });

  it('a handler that removes itself while firing does not skip the next one', () => {
    const model = new ViewModel({ a: 0 }, () => undefined);
    const calls: string[] = [];
    const first = (): void => {
      calls.push('first');
      model.off('change:a', first);
    };
    model.on('change:a', first);
    model.on('change:a', () => calls.push('second'));
    model.set('a', 1);
    expect(calls).toEqual(['first', 'second']);
  });
});

describe('toRows', () => {
  it('maps [rank_or_pod, text] to the views rows and marks error lines like the kernel does', () => {
    expect(
      toRows([
        [0, 'step 1 loss 0.5'],
        [1, 'Traceback (most recent call last):'],
        ['svc-abc', 'ValueError: bad'],
        [null, 'srun: error: node1: task 1: Exited'],
        [2, 'fine', true]
      ])
    ).toEqual([
      [0, 'step 1 loss 0.5', false],
      [1, 'Traceback (most recent call last):', true],
      ['svc-abc', 'ValueError: bad', true],
      [null, 'srun: error: node1: task 1: Exited', true],
      [2, 'fine', true]
    ]);
  });

  it('drops malformed rows and never throws', () => {
    expect(toRows(null)).toEqual([]);
    expect(toRows('x')).toEqual([]);
    expect(toRows([[0], 'x', [0, 5], null, [{}, 'ok']])).toEqual([[null, 'ok', false]]);
  });
});

describe('toRows fuzz', () => {
  it('returns only well-formed rows for arbitrary JSON (seeded)', () => {
    let seed = 99;
    const rand = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const atoms: unknown[] = [0, 3, -1, 'pod-a', '', 'Traceback (most recent call last):', null, true, false, {}, [], 1.5];
    const value = (depth: number): unknown => {
      if (depth > 2 || rand() < 0.5) {
        return atoms[Math.floor(rand() * atoms.length)];
      }
      return Array.from({ length: Math.floor(rand() * 4) }, () => value(depth + 1));
    };
    for (let i = 0; i < 3000; i++) {
      for (const row of toRows(value(0))) {
        expect(row).toHaveLength(3);
        expect(typeof row[1]).toBe('string');
        expect(typeof row[2]).toBe('boolean');
        expect(row[0] === null || ['number', 'string'].includes(typeof row[0])).toBe(true);
      }
    }
  });
});

describe('fileRows', () => {
  it('keeps well-formed entries of the files answer as [name, size, mtime]', async () => {
    const { fileRows } = await import('../src/adapter');
    expect(
      fileRows({
        files: [
          { name: 'out/loss.csv', size: 16, mtime: 1700000000.5 },
          { name: '', size: 1, mtime: 0 },
          { name: 'neg', size: -1, mtime: 0 },
          { name: 'no-mtime', size: 3 },
          'garbage',
          null
        ]
      })
    ).toEqual([
      ['out/loss.csv', 16, 1700000000.5, 'output'],
      ['no-mtime', 3, 0, 'output']
    ]);
    expect(fileRows({})).toEqual([]);
    expect(fileRows(null)).toEqual([]);
  });
});

describe('fileRows groups', () => {
  it("keeps the server's group and order; an unknown group reads output", async () => {
    const { fileRows } = await import('../src/adapter');
    expect(
      fileRows({
        files: [
          { name: 'loss.png', size: 1, mtime: 0, group: 'output' },
          { name: 'checkpoints/c.pt', size: 1, mtime: 0, group: 'checkpoints' },
          { name: 'job.log', size: 1, mtime: 0, group: 'log' },
          { name: '.jobid', size: 1, mtime: 0, group: 'tiers' },
          { name: 'x', size: 1, mtime: 0, group: '<b>' }
        ]
      }).map(r => [r[0], r[3]])
    ).toEqual([
      ['loss.png', 'output'],
      ['checkpoints/c.pt', 'checkpoints'],
      ['job.log', 'log'],
      ['.jobid', 'tiers'],
      ['x', 'output']
    ]);
  });
});

describe('filePath', () => {
  it('encodes each part of a file name as its own segment', async () => {
    const { filePath } = await import('../src/api');
    expect(filePath('box', '42', 'out/a b#?.csv')).toBe('jobs/box/42/files/out/a%20b%23%3F.csv');
  });
});

describe('streamTraits', () => {
  it('keeps only what the log decides (charts, fold label, summary)', () => {
    const view = { metrics: { loss: [[1, 2]] }, fold_label: 'x', summary: 's', state: 'RUNNING', ranks: [] };
    expect(streamTraits(view)).toEqual({ metrics: { loss: [[1, 2]] }, fold_label: 'x', summary: 's' });
    expect(streamTraits({ state: 'FAILED' })).toBeNull();
    for (const bad of [null, undefined, 3, 'summary', [], [['summary', 's']]]) {
      expect(streamTraits(bad)).toBeNull();
    }
  });

  it('never passes a trait outside the list (seeded)', () => {
    let seed = 29;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
    const names = ['metrics', 'metrics_rank', 'metrics_note', 'fold_label', 'summary', 'state', '__proto__', 'ranks', ''];
    for (let i = 0; i < 300; i++) {
      const view: Record<string, unknown> = {};
      for (const name of names) {
        if (rand() < 0.4) {
          view[name] = rand();
        }
      }
      const out = streamTraits(view);
      for (const key of Object.keys(out ?? {})) {
        expect(['metrics', 'metrics_rank', 'metrics_note', 'fold_label', 'summary']).toContain(key);
      }
    }
  });
});
