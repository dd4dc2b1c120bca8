// The doctor's JSON report (`POST profiles/{name}/doctor`, API.md) as typed values and as the
// lines the terminal shows (pure: no DOM, tested with vitest).

export interface DoctorCheck {
  name: string;
  status: 'OK' | 'WARN' | 'FAIL' | 'SKIP';
  detail: string;
  fix: string;
}

export interface DoctorReport {
  ok: boolean;
  checks: DoctorCheck[];
  /** The suggested Role (Kubernetes, `suggest_role=1`), or "". */
  extra: string;
}

const STATUSES = new Set(['OK', 'WARN', 'FAIL', 'SKIP']);

/** The server's answer for one profile as typed values; anything malformed is left out. */
export function parseDoctor(data: unknown): DoctorReport {
  const raw = (data ?? {}) as { ok?: unknown; profiles?: unknown };
  const first = (Array.isArray(raw.profiles) ? raw.profiles[0] : undefined) as
    | { checks?: unknown; extra?: unknown }
    | undefined;
  const checks: DoctorCheck[] = [];
  for (const entry of Array.isArray(first?.checks) ? first.checks : []) {
    const c = (entry ?? {}) as Record<string, unknown>;
    if (typeof c.name !== 'string' || typeof c.status !== 'string' || !STATUSES.has(c.status)) {
      continue;
    }
    checks.push({
      name: c.name,
      status: c.status as DoctorCheck['status'],
      detail: typeof c.detail === 'string' ? c.detail : '',
      fix: typeof c.fix === 'string' ? c.fix : ''
    });
  }
  return { ok: raw.ok === true, checks, extra: typeof first?.extra === 'string' ? first.extra : '' };
}

/** The report's lines as the terminal shows them: `STATUS  name: detail`, then `→ fix` for a
 * FAIL or WARN that has one; the last line sums it up. */
export function doctorLines(report: DoctorReport): { status: string; text: string }[] {
  const lines: { status: string; text: string }[] = [];
  for (const c of report.checks) {
    lines.push({ status: c.status, text: `${c.status.padEnd(4)}  ${c.name}: ${c.detail}` });
    if (c.fix && (c.status === 'FAIL' || c.status === 'WARN')) {
      lines.push({ status: 'fix', text: `      → ${c.fix}` });
    }
  }
  const fails = report.checks.filter(c => c.status === 'FAIL').length;
  lines.push({
    status: report.ok ? 'OK' : 'FAIL',
    text: report.ok ? 'all good' : `FAILED: ${fails} check${fails === 1 ? '' : 's'} failed`
  });
  return lines;
}

/** What a profile's check does, in the words of its tier (a profile on this machine makes no
 * login; a Kubernetes profile asks its API server): the Check button's tooltip and the line shown
 * while it runs. */
export function checkWords(profile: { tier: string; host: string | null; where: string }): {
  running: string;
  title: string;
} {
  if (profile.tier === 'kubernetes') {
    const where = profile.where || 'the kubeconfig context';
    return {
      running: `checking… (asks the Kubernetes API of ${where})`,
      title: `Check ${where}: kubeconfig, API server, namespace access, permissions`
    };
  }
  if (!profile.host) {
    return {
      running: 'checking… (commands on this machine, no login)',
      title: `Check ${profile.tier} on this machine: its commands, workdir, Python`
    };
  }
  return {
    running: `checking… (a login to ${profile.host} and one command on the cluster)`,
    title: `Check ${profile.host}: reach, host key, login, scheduler, workdir, Python`
  };
}

/** The Check all line once every profile answered: `3 profiles checked: 2 all good, 1 failed`. */
export function checkAllSummary(outcomes: ('ok' | 'failed' | 'error')[]): string {
  const n = outcomes.length;
  const count = (o: string) => outcomes.filter(x => x === o).length;
  const parts = [
    count('ok') ? `${count('ok')} all good` : '',
    count('failed') ? `${count('failed')} failed` : '',
    count('error') ? `${count('error')} could not be checked` : ''
  ].filter(Boolean);
  return `${n} profile${n === 1 ? '' : 's'} checked${parts.length ? ': ' + parts.join(', ') : ''}`;
}
