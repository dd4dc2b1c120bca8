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

describe('checkWords (issue 29 §12: text that fits the profile tier)', () => {
  it('promises no login for a profile on this machine', async () => {
    const { checkWords } = await import('../src/doctorReport');
    const local = checkWords({ tier: 'local', host: null, where: 'this machine' });
    expect(local.running).not.toMatch(/login to|on the cluster/);
    expect(local.running).toContain('no login');
    const here = checkWords({ tier: 'slurm', host: null, where: 'this machine' });
    expect(here.running).toContain('no login');
  });

  it('names the login host of a Slurm profile and the API of a Kubernetes one', async () => {
    const { checkWords } = await import('../src/doctorReport');
    expect(checkWords({ tier: 'slurm', host: 'login1', where: 'login1' }).running).toContain('a login to login1');
    const k8s = checkWords({ tier: 'kubernetes', host: 'kind', where: 'kind, namespace ml' });
    expect(k8s.running).toContain('Kubernetes API');
    expect(k8s.running).not.toContain('login');
  });
});

describe('checkAllSummary', () => {
  it('sums up every outcome', async () => {
    const { checkAllSummary } = await import('../src/doctorReport');
    expect(checkAllSummary(['ok', 'failed', 'ok'])).toBe('3 profiles checked: 2 all good, 1 failed');
    expect(checkAllSummary(['error'])).toBe('1 profile checked: 1 could not be checked');
    expect(checkAllSummary([])).toBe('0 profiles checked');
  });
});
