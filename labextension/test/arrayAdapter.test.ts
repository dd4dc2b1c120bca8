import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { ARRAY_DEFAULTS, arrayAction, taskItem } from '../src/adapter';
import { Item } from '../src/state';

const ARRAY: Item = {
  key: 'laptop/51',
  id: '51',
  kind: 'job',
  name: 'sweep-lr',
  profile: 'laptop',
  tier: 'local',
  state: 'RUNNING',
  terminal: false,
  size: '4 tasks: 2 RUNNING, 2 PENDING',
  where: '',
  reason: '',
  started: null,
  elapsed_s: 12,
  summary: 'array 51 RUNNING'
};

describe('arrayAction', () => {
  it('maps Cancel all to the array, a row Cancel to the task ID_i, a click to opening it', () => {
    expect(arrayAction({ kind: 'cancel' }, '51')).toEqual({ action: 'cancel', id: '51', task: null });
    expect(arrayAction({ kind: 'cancel_task', task: 7 }, '51')).toEqual({ action: 'cancel', id: '51_7', task: 7 });
    expect(arrayAction({ kind: 'select', task: 0 }, '51')).toEqual({ action: 'open', id: '51_0', task: 0 });
  });

  it('ignores other kinds and tasks that are not whole numbers from 0', () => {
    for (const task of [-1, 1.5, '3', true, null, undefined, NaN, Infinity, 2 ** 60, [1], { n: 1 }]) {
      expect(arrayAction({ kind: 'cancel_task', task }, '51')).toBeNull();
      expect(arrayAction({ kind: 'select', task }, '51')).toBeNull();
    }
    expect(arrayAction({ kind: 'hello' }, '51')).toBeNull();
    expect(arrayAction({ kind: 'scale', replicas: 2 }, '51')).toBeNull();
    expect(arrayAction({}, '51')).toBeNull();
  });

  it('never throws and only ever names the array or one of its tasks (seeded fuzz)', () => {
    let seed = 20261203;
    const rand = (): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const values = [0, 3, -2, 0.5, 'x', '../', true, null, undefined, {}, [], 1e300, 'cancel', 'select'];
    const pick = (): unknown => values[Math.floor(rand() * values.length)];
    for (let i = 0; i < 2000; i++) {
      const request: Record<string, unknown> = {};
      for (const name of ['kind', 'task', 'extra']) {
        if (rand() < 0.8) {
          request[name] = rand() < 0.5 ? ['cancel', 'cancel_task', 'select'][Math.floor(rand() * 3)] : pick();
        }
      }
      const action = arrayAction(request, '51');
      if (action !== null) {
        expect(action.id === '51' || /^51_\d+$/.test(action.id)).toBe(true);
        expect(action.id === '51').toBe(action.action === 'cancel' && action.task === null);
      }
    }
  });
});

describe('taskItem', () => {
  it("is the task's own item: key profile/ID_i, its row's state", () => {
    const task = taskItem(ARRAY, 2, [2, 'lr=3e-4', 'FAILED', '0:05', '', 'rank 0 exit 1']);
    expect(task.key).toBe('laptop/51_2');
    expect(task.id).toBe('51_2');
    expect(task.kind).toBe('job');
    expect(task.profile).toBe('laptop');
    expect(task.state).toBe('FAILED');
    expect(task.name).toBe('sweep-lr task 2');
    expect(taskItem(ARRAY, 3).state).toBe('PENDING');
    expect(ARRAY.key).toBe('laptop/51'); // the array's item is left alone
  });
});

describe('ARRAY_DEFAULTS', () => {
  it("has every synced trait of the notebook's ArrayTable", () => {
    const py = readFileSync(join(__dirname, '..', '..', 'jupyter_tiers', 'faces', 'widgets', 'array_view.py'), 'utf8');
    const table = py.slice(py.indexOf('class ArrayTable'), py.indexOf('class ArrayView'));
    const traits = [...table.matchAll(/^ {4}(\w+)(?::[^=]*)? = t\.\w+\(.*\.tag\(sync=True\)/gm)].map(m => m[1]);
    expect(traits.length).toBeGreaterThan(10);
    expect(Object.keys(ARRAY_DEFAULTS).sort()).toEqual(traits.sort());
  });
});
