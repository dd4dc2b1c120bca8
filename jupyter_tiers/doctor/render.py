"""The doctor's report as text (one line per check) or JSON (pure; no I/O)."""

from __future__ import annotations

import json
from typing import Any

from .model import Report, Status

_MARK_WIDTH = max(len(s.value) for s in Status)


def _clean(text: str) -> str:
    """Cluster text is shown as text: control characters (a terminal escape) become '?'."""
    return "".join(ch if ch.isprintable() else "?" for ch in text.replace("\n", " "))


def render_text(report: Report) -> str:
    """``STATUS  check: detail`` per line under a header per profile; a FAIL's (or WARN's) fix on
    the next line after ``→``; a summary line at the end."""
    lines: list[str] = []
    for prof in report.profiles:
        lines.append(f"{prof.profile} ({prof.tier})")
        for check in prof.checks:
            lines.append(f"  {check.status.value:<{_MARK_WIDTH}}  {check.name}: {_clean(check.detail)}")
            if check.fix and check.status in (Status.FAIL, Status.WARN):
                lines.append(f"  {'':<{_MARK_WIDTH}}  → {_clean(check.fix)}")
        if prof.extra:
            lines.append(prof.extra.rstrip("\n"))
    counts = {s: sum(c.status is s for p in report.profiles for c in p.checks) for s in Status}
    shown = ", ".join(f"{n} {s.value}" for s, n in counts.items() if n)
    lines.append(f"{'FAILED' if report.failed else 'all good'}: {shown or 'no checks'}")
    return "\n".join(lines)


def report_data(report: Report) -> dict[str, Any]:
    """The report as plain JSON-able data (``--json``)."""
    return {
        "ok": not report.failed,
        "profiles": [
            {"profile": p.profile, "tier": p.tier, "ok": not p.failed,
             "checks": [{"name": c.name, "status": c.status.value, "detail": c.detail,
                         "fix": c.fix, "data": c.data} for c in p.checks],
             **({"extra": p.extra} if p.extra else {})}
            for p in report.profiles
        ],
    }


def render_json(report: Report) -> str:
    return json.dumps(report_data(report), indent=2, sort_keys=False, default=str)
