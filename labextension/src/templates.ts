// The cells the "Insert ... cell" commands write (pure).

export type CellKind = 'slurm_train' | 'k8s_serve';

export interface ProfileInfo {
  name: string;
  tier: string;
  default?: boolean;
}

/** Which profile tiers each magic runs on. */
const TIERS: Record<CellKind, ReadonlySet<string>> = {
  slurm_train: new Set(['slurm', 'local']),
  k8s_serve: new Set(['kubernetes'])
};

/**
 * The profile to fill in: the default one when its tier suits the magic, else the first that
 * suits it (by name), else null (the magic then uses tiers.yaml's default).
 */
export function pickProfile(
  profiles: ProfileInfo[],
  defaultName: string | null | undefined,
  kind: CellKind
): string | null {
  const fits = profiles.filter(p => TIERS[kind].has(p.tier));
  const chosen =
    fits.find(p => p.name === defaultName) ??
    fits.find(p => p.default) ??
    [...fits].sort((a, b) => (a.name < b.name ? -1 : 1))[0];
  return chosen ? chosen.name : null;
}

/** A word for the magic's line: as it is when plain, else single-quoted (shlex rules). */
export function quoteWord(word: string): string {
  if (/^[A-Za-z0-9_.@%+=:,/-]+$/.test(word)) {
    return word;
  }
  return `'${word.replace(/'/g, `'"'"'`)}'`;
}

/** The text of the inserted cell. */
export function cellTemplate(kind: CellKind, profile: string | null): string {
  const flag = profile ? ` --profile ${quoteWord(profile)}` : '';
  if (kind === 'slurm_train') {
    return [
      `%%slurm_train${flag} --nodes 1 --time 00:10:00 --name my-training`,
      'import os',
      'print("rank", os.environ.get("RANK"), "of", os.environ.get("WORLD_SIZE"), "on", os.uname().nodename)'
    ].join('\n');
  }
  return [
    `%%k8s_serve${flag} --name my-service --image python:3.11-slim --replicas 1 --port 8000 --readiness /`,
    'import http.server',
    'http.server.test(HandlerClass=http.server.SimpleHTTPRequestHandler, port=8000, bind="0.0.0.0")'
  ].join('\n');
}
