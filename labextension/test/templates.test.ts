import { describe, expect, it } from 'vitest';

import { cellTemplate, pickProfile, quoteWord } from '../src/templates';
import { detailsPath, errorMessage, itemPath, parseProfiles, query } from '../src/api';

const profiles = [
  { name: 'zeta', tier: 'slurm' },
  { name: 'box', tier: 'slurm' },
  { name: 'laptop', tier: 'local' },
  { name: 'serving', tier: 'kubernetes' }
];

describe('pickProfile', () => {
  it('prefers the default when its tier fits the magic', () => {
    expect(pickProfile(profiles, 'laptop', 'slurm_train')).toBe('laptop');
    expect(pickProfile(profiles, 'serving', 'k8s_serve')).toBe('serving');
  });
  it('else the first fitting profile by name, else null', () => {
    expect(pickProfile(profiles, 'serving', 'slurm_train')).toBe('box');
    expect(pickProfile(profiles, null, 'k8s_serve')).toBe('serving');
    expect(pickProfile([{ name: 'box', tier: 'slurm' }], 'box', 'k8s_serve')).toBeNull();
  });
});

describe('cellTemplate', () => {
  it('fills the profile into the magic line', () => {
    expect(cellTemplate('slurm_train', 'box').split('\n')[0]).toMatch(/^%%slurm_train --profile box --nodes 1 /);
    expect(cellTemplate('k8s_serve', 'serving').split('\n')[0]).toMatch(/^%%k8s_serve --profile serving --name /);
    expect(cellTemplate('slurm_train', null).split('\n')[0]).not.toContain('--profile');
  });
  it('quotes a profile name that is not a plain word', () => {
    expect(quoteWord('box')).toBe('box');
    expect(quoteWord("a b'c")).toBe(`'a b'"'"'c'`);
    expect(cellTemplate('slurm_train', 'my lab')).toContain("--profile 'my lab'");
  });
});

describe('api helpers', () => {
  it('encodes profile and id as path segments', () => {
    expect(itemPath('box', '41')).toBe('jobs/box/41');
    expect(itemPath('a/b', 'x y?')).toBe('jobs/a%2Fb/x%20y%3F');
  });
  it('builds query strings from defined values only', () => {
    expect(query({ offset: 0, rank: undefined, token: 'a&b' })).toBe('?offset=0&token=a%26b');
    expect(query({})).toBe('');
  });
  it('reads the server error sentence, else says what the status was', () => {
    expect(errorMessage(409, 'Conflict', '{"error": "a service cannot be cancelled"}')).toBe('a service cannot be cancelled');
    expect(errorMessage(502, 'Bad Gateway', '<html>')).toBe('the server answered 502 Bad Gateway');
    expect(errorMessage(404, 'Not Found', '<html>nope</html>')).toMatch(/server extension is not answering/);
  });
});

describe('profiles and details paths', () => {
  it('keeps a local profile host null (the server sends null), and the where text', () => {
    const answer = {
      profiles: [
        { name: 'laptop', tier: 'local', host: null, where: 'this machine', default: true },
        { name: 'box', tier: 'slurm', host: 'login.example', where: 'login.example', default: false },
        { name: 'serving', tier: 'kubernetes', host: null, where: 'kubeconfig context', default: false }
      ],
      default: 'laptop'
    };
    const parsed = parseProfiles(answer);
    expect(parsed.default).toBe('laptop');
    expect(parsed.profiles.map(p => [p.name, p.host, p.where, p.default])).toEqual([
      ['laptop', null, 'this machine', true],
      ['box', 'login.example', 'login.example', false],
      ['serving', null, 'kubeconfig context', false]
    ]);
    expect(pickProfile(parsed.profiles, parsed.default, 'slurm_train')).toBe('laptop');
  });
  it('drops malformed entries and never turns a missing host into text', () => {
    const parsed = parseProfiles({
      profiles: [{ name: 'a', tier: 'local' }, { tier: 'slurm' }, null, 7, { name: 'b', tier: 'slurm', host: 3 }],
      default: null
    });
    expect(parsed.profiles).toEqual([
      { name: 'a', tier: 'local', host: null, where: 'this machine', default: false },
      { name: 'b', tier: 'slurm', host: null, where: 'this machine', default: false }
    ]);
    expect(parsed.default).toBeNull();
    expect(parseProfiles(undefined)).toEqual({ profiles: [], default: null });
    expect(parseProfiles({ profiles: 'x', default: 5 })).toEqual({ profiles: [], default: null });
  });
  it('asks for a cached detail with refresh=0 and an explicit refresh without it', () => {
    expect(detailsPath('box', '41', false)).toBe('jobs/box/41?refresh=0');
    expect(detailsPath('box', '41', true)).toBe('jobs/box/41');
    expect(detailsPath('a/b', 'x y', false)).toBe('jobs/a%2Fb/x%20y?refresh=0');
  });
});
