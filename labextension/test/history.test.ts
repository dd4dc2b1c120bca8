import { describe, expect, it } from 'vitest';

import {
  DETAIL_TAIL,
  HistoryRow,
  attachTarget,
  cleanLog,
  detailQuery,
  exitLabel,
  formatBytes,
  historyErrorText,
  historyProfiles,
  historyQuery,
  jobRef,
  oneLine,
  parseHistory,
  parseRow,
  pickHistoryProfile,
  readonlyDetail,
  rowCells
} from '../src/history';
import { query } from '../src/api';
import { Item } from '../src/state';

// A row as the server sends it (jupyter_tiers.slurm.history.HistoryRow.to_json()).
function raw(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    job_id: '807',
    display_id: '807',
    name: 'plain-sbatch',
    user: 'root',
    state: 'FAILED',
    exit_code: 3,
    signal: null,
    exit: '3',
    elapsed_s: 3,
    nodes: 2,
    nodelist: 'node[1-2]',
    max_rss: 50_331_648,
    submit: '2026-12-03T03:03:13',
    start: '2026-12-03T03:03:13',
    end: '2026-12-03T03:03:16',
    partition: 'debug',
    workdir: '/var/lib/jupyter-tiers-jobs/history-1',
    ours: false,
    key: '',
    ...over
  };
}

function row(over: Record<string, unknown> = {}): HistoryRow {
  const r = parseRow(raw(over));
  if (!r) {
    throw new Error('bad test row');
  }
  return r;
}

describe('parseHistory', () => {
  it('types the answer and drops malformed rows', () => {
    const answer = parseHistory({
      profile: 'box',
      rows: [raw(), raw({ job_id: 'x' }), raw({ state: '' }), null, 'text', raw({ job_id: '808', ours: true, key: 'box/808' })],
      output: null,
      output_path: ''
    });
    expect(answer.profile).toBe('box');
    expect(answer.rows.map(r => r.job_id)).toEqual(['807', '808']);
    expect(answer.rows[1].ours).toBe(true);
    expect(answer.rows[1].key).toBe('box/808');
    expect(answer.output).toBeNull();
  });

  it('survives anything the server could send', () => {
    for (const data of [null, undefined, 3, 'x', [], { rows: 'no' }, { rows: [{}] }]) {
      expect(parseHistory(data).rows).toEqual([]);
    }
  });

  it('a row marked ours without a key is not ours (nothing to attach to)', () => {
    expect(row({ ours: true, key: '' }).ours).toBe(false);
    expect(row({ ours: 'yes', key: 'box/1' }).ours).toBe(false);
  });

  it('missing numbers are null, not 0', () => {
    const r = row({ elapsed_s: null, nodes: 'two', max_rss: -1, exit: '', exit_code: null });
    expect([r.elapsed_s, r.nodes, r.max_rss]).toEqual([null, null, null]);
    expect(r.exit).toBe('-');
  });
});

describe('queries', () => {
  it('list: days always, profile and state only when chosen', () => {
    expect(query(historyQuery({ profile: 'box', days: 7, state: '' }))).toBe('?profile=box&days=7&limit=200');
    expect(query(historyQuery({ profile: 'box', days: 1, state: 'FAILED' }, 50))).toBe(
      '?profile=box&days=1&state=FAILED&limit=50'
    );
  });

  it('detail: the job ref (array tasks as 12_3) and the tail', () => {
    expect(detailQuery('box', row())).toEqual({ profile: 'box', job: '807', tail: DETAIL_TAIL });
    expect(jobRef(row({ job_id: '13', display_id: '12_3' }))).toBe('12_3');
    expect(jobRef(row({ job_id: '12', display_id: '12_[4-10]' }))).toBe('12');
  });
});

describe('profiles', () => {
  const profiles = [
    { name: 'laptop', tier: 'local', host: null, where: 'this machine', default: true },
    { name: 'zeta', tier: 'slurm', host: 'z', where: 'z', default: false },
    { name: 'box', tier: 'slurm', host: 'b', where: 'b', default: false },
    { name: 'serving', tier: 'kubernetes', host: 'ctx', where: 'ctx', default: false }
  ];

  it('offers the Slurm profiles only, the default first', () => {
    expect(historyProfiles(profiles, 'laptop')).toEqual(['box', 'zeta']);
    expect(historyProfiles(profiles, 'zeta')).toEqual(['zeta', 'box']);
    expect(historyProfiles([], null)).toEqual([]);
  });

  it('keeps the chosen profile while it exists', () => {
    expect(pickHistoryProfile(['box', 'zeta'], 'zeta')).toBe('zeta');
    expect(pickHistoryProfile(['box', 'zeta'], 'gone')).toBe('box');
    expect(pickHistoryProfile([], 'gone')).toBe('');
  });
});

describe('rowCells', () => {
  it('shows state, elapsed, exit, nodes, max RSS and who submitted it', () => {
    const c = rowCells(row());
    expect(c).toMatchObject({
      id: '807',
      name: 'plain-sbatch',
      state: 'FAILED',
      stateClass: 'bad',
      elapsed: '00:00:03',
      exit: '3',
      nodes: '2 node[1-2]',
      maxRss: '48.0M',
      origin: 'other'
    });
    expect(c.title).toContain('read-only');
    const ours = rowCells(row({ ours: true, key: 'box/807', state: 'COMPLETED', elapsed_s: null, nodes: null, nodelist: '' }));
    expect(ours).toMatchObject({ origin: 'ours', stateClass: 'ok', elapsed: '-', nodes: '-' });
  });

  it('cluster text cannot break the row', () => {
    const c = rowCells(row({ name: 'a\nb\u001b[31m<b>x</b>' }));
    expect(c.name).toBe('a?b?[31m<b>x</b>'); // shown as text: the markup stays visible, inert
    expect(oneLine('x'.repeat(100), 10)).toBe('xxxxxxxxx…');
  });

  it('formats bytes like the %tiers history table', () => {
    expect([formatBytes(null), formatBytes(512), formatBytes(16_662_528), formatBytes(1.5 * 1024 ** 3)]).toEqual([
      '-',
      '512B',
      '15.9M',
      '1.5G'
    ]);
    expect(formatBytes(200 * 1024 * 1024)).toBe('200M');
    expect(formatBytes(2 * 1024 ** 4)).toBe('2.0T');
  });
});

describe('attachTarget', () => {
  it('another submitter’s job opens read-only', () => {
    expect(attachTarget('box', row())).toEqual({ kind: 'readonly', profile: 'box', row: row() });
  });

  it('our job opens its live panel, from the sidebar’s item when it has it', () => {
    const mine = row({ ours: true, key: 'box/808', job_id: '808', display_id: '808', state: 'RUNNING' });
    const known = new Map<string, Item>([
      ['box/808', { key: 'box/808', id: '808', kind: 'job', name: 'live', profile: 'box', tier: 'slurm', state: 'RUNNING',
        terminal: false, size: '2 ranks on 2 nodes', where: 'node[1-2]', reason: '', started: null, elapsed_s: 5, summary: '' }]
    ]);
    const fromState = attachTarget('box', mine, known);
    expect(fromState.kind === 'item' && fromState.item.name).toBe('live');
    const built = attachTarget('box', mine, new Map());
    expect(built.kind).toBe('item');
    if (built.kind === 'item') {
      expect(built.item).toMatchObject({ key: 'box/808', id: '808', profile: 'box', kind: 'job', terminal: false });
    }
    const ended = attachTarget('box', row({ ours: true, key: 'other/9', job_id: '9' }), new Map());
    expect(ended.kind === 'item' && [ended.item.profile, ended.item.id, ended.item.terminal]).toEqual(['other', '9', true]);
  });
});

describe('readonlyDetail', () => {
  const answer = (over: Record<string, unknown>) => parseHistory({ profile: 'box', rows: [raw()], output: null, output_path: '', ...over });

  it('the output end when it was readable', () => {
    const d = readonlyDetail(answer({ output: 'hello\r\n\u0007bell\n', output_path: '/w/slurm-807.out' }), row(), 5);
    expect(d.log).toBe('hello\n?bell\n');
    expect(d.logNote).toBe('Last 5 lines of /w/slurm-807.out (read-only)');
    expect(Object.fromEntries(d.facts)).toMatchObject({ State: 'FAILED', 'Exit code': '3', 'Max RSS': '48.0M', Nodes: '2 node[1-2]' });
  });

  it('says where it looked when the output is not readable', () => {
    const d = readonlyDetail(answer({ output_path: '/tmp/slurm-807.out' }), row());
    expect(d.log).toBeNull();
    expect(d.logNote).toContain('not readable at /tmp/slurm-807.out');
    expect(readonlyDetail(answer({}), row()).logNote).toContain('(no working directory in accounting)');
  });

  it('a job gone from accounting says so', () => {
    const d = readonlyDetail(parseHistory({ profile: 'box', rows: [] }), row());
    expect(d.log).toBeNull();
    expect(d.logNote).toContain('no longer');
  });

  it('the latest row wins over the one clicked', () => {
    const d = readonlyDetail(answer({ rows: [raw({ state: 'COMPLETED', exit: '0' })] }), row());
    expect(Object.fromEntries(d.facts).State).toBe('COMPLETED');
  });
});

describe('errors', () => {
  it('shows the server’s sentence (accounting off included), capitalised', () => {
    expect(historyErrorText('no job history: Slurm accounting is off on this cluster')).toBe(
      'No job history: Slurm accounting is off on this cluster'
    );
    expect(historyErrorText('')).toBe('the history could not be read');
    expect(cleanLog('a\tb\n')).toBe('a\tb\n');
  });
});

describe('parseHistory fuzz (seeded)', () => {
  // A small LCG: the same sequence every run.
  let seed = 20261203;
  const rand = (): number => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  const pick = <T>(xs: T[]): T => xs[Math.floor(rand() * xs.length)];
  const values: unknown[] = [null, undefined, 0, -1, 1.5, 1e300, NaN, '', '12', 'x', '12_3', '<b>', '\u0000', true, [], {}, [1]];
  const fields = Object.keys(raw());

  it('every answer parses to well-typed rows and never throws', () => {
    for (let i = 0; i < 2000; i++) {
      const rows = Array.from({ length: Math.floor(rand() * 4) }, () => {
        const r = raw();
        for (let k = Math.floor(rand() * 5); k > 0; k--) {
          r[pick(fields)] = pick(values);
        }
        return rand() < 0.1 ? pick(values) : r;
      });
      const answer = parseHistory(rand() < 0.1 ? pick(values) : { profile: pick(values), rows, output: pick(values), output_path: pick(values) });
      for (const r of answer.rows) {
        expect(r.job_id).toMatch(/^\d+$/);
        expect(typeof r.state === 'string' && r.state.length > 0).toBe(true);
        for (const n of [r.elapsed_s, r.nodes, r.max_rss]) {
          expect(n === null || (Number.isFinite(n) && n >= 0)).toBe(true);
        }
        expect(r.ours === (r.key !== '')).toBe(true);
        const c = rowCells(r);
        expect(typeof c.name).toBe('string');
        expect(c.name).not.toMatch(/[\u0000-\u001f]/);
      }
      expect(answer.output === null || typeof answer.output === 'string').toBe(true);
      expect(typeof answer.profile).toBe('string');
    }
  });
});

describe('exitLabel', () => {
  it('prefixes a bare exit code, keeps who failed as the server names it', () => {
    expect(exitLabel('1')).toBe('exit 1');
    expect(exitLabel('0:15')).toBe('exit 0:15');
    expect(exitLabel('-')).toBe('exit -');
    expect(exitLabel('rank 3 exit 1')).toBe('rank 3 exit 1');
    expect(exitLabel('step 0 exit 1')).toBe('step 0 exit 1');
  });
});
