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
