import { describe, expect, it } from 'vitest';

import { doctorLines, parseDoctor } from '../src/doctorReport';

const answer = {
  ok: false,
  profiles: [
    {
      profile: 'box',
      tier: 'slurm',
      ok: false,
      checks: [
        { name: 'dns', status: 'OK', detail: 'login is 192.0.2.7', fix: '', data: {} },
        { name: 'topology', status: 'WARN', detail: 'no plugin', fix: '', data: {} },
        { name: 'host key', status: 'FAIL', detail: 'unknown <b>key</b>', fix: 'confirm it', data: {} },
        { name: 'login', status: 'SKIP', detail: 'host key', fix: '', data: {} },
        { name: 'bad', status: 'MAYBE', detail: 'x' },
        { status: 'OK' },
        null
      ]
    }
  ]
};

describe('parseDoctor', () => {
  it('keeps the well-formed checks in order', () => {
    const report = parseDoctor(answer);
    expect(report.ok).toBe(false);
    expect(report.checks.map(c => c.name)).toEqual(['dns', 'topology', 'host key', 'login']);
    expect(report.extra).toBe('');
  });
  it('survives anything', () => {
    for (const junk of [null, undefined, 3, 'x', { profiles: 'no' }, { profiles: [null] }, []]) {
      expect(parseDoctor(junk)).toEqual({ ok: false, checks: [], extra: '' });
    }
  });
});

describe('doctorLines', () => {
  it('one line per check, the fix under a FAIL, a summary last', () => {
    expect(doctorLines(parseDoctor(answer)).map(l => l.text)).toEqual([
      'OK    dns: login is 192.0.2.7',
      'WARN  topology: no plugin',
      'FAIL  host key: unknown <b>key</b>',
      '      → confirm it',
      'SKIP  login: host key',
      'FAILED: 1 check failed'
    ]);
    expect(doctorLines({ ok: true, checks: [], extra: '' }).at(-1)?.text).toBe('all good');
  });
});
