"""``%tiers`` subcommands (also usable outside IPython): jobs, attach, logs, cancel, profiles."""

from __future__ import annotations

import argparse
import time
from typing import Any, NoReturn

from .config import load_config
from .registry import JobRecord, Registry


class CommandUsage(Exception):
    """Bad subcommand or option; the magic turns it into a UsageError."""


class _HelpShown(Exception):
    """``-h``: argparse printed the help; nothing else to do."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise CommandUsage(f"%tiers: {message}\n{self.format_usage().strip()}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if status == 0 and not message:
            raise _HelpShown()  # the help is already printed; do not print it again as an error
        raise CommandUsage(message or self.format_help())


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="%tiers", add_help=True)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    jobs = sub.add_parser("jobs", help="jobs of every tier, newest first")
    jobs.add_argument("--profile", "-p")
    jobs.add_argument("--limit", type=int, default=20)
    attach = sub.add_parser("attach", help="show the live view of a job")
    attach.add_argument("job", help="job id or profile/job id")
    attach.add_argument("--text", action="store_true")
    attach.add_argument("--wait", action="store_true")
    logs = sub.add_parser("logs", help="print a job's log")
    logs.add_argument("job")
    logs.add_argument("--rank", type=int)
    logs.add_argument("--tail", type=int)
    cancel = sub.add_parser("cancel", help="cancel a job")
    cancel.add_argument("job")
    sub.add_parser("profiles", help="list the configured profiles")
    return parser


def format_jobs(records: list[JobRecord], now: float | None = None) -> str:
    """A fixed-width table of registry records (pure, for tests)."""
    now = now or time.time()
    header = ("JOB", "NAME", "PROFILE", "TIER", "STATE", "RANKS", "NODES", "SUBMITTED")
    rows = [header]
    for r in records:
        age = int(now - r.submitted_at)
        ago = f"{age // 3600}h ago" if age >= 3600 else f"{age // 60}m ago" if age >= 60 else f"{age}s ago"
        rows.append((r.job_id, r.name, r.profile, r.tier, r.state, str(r.world_size),
                     r.nodelist or "-", ago))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in rows)


def refresh_states(records: list[JobRecord]) -> list[str]:
    """Ask each profile's tier once (batched) about its unfinished jobs, updating the registry.

    Returns a warning per profile that could not be asked; its jobs keep their recorded state.
    """
    from .api import connect
    from .errors import TiersError
    from .model import JobState

    warnings = []
    by_profile: dict[str, list[JobRecord]] = {}
    for rec in records:
        if not JobState.parse(rec.state).terminal:
            by_profile.setdefault(rec.profile, []).append(rec)
    for profile, recs in sorted(by_profile.items()):
        try:
            connect(profile).status(recs)
        except (TiersError, ValueError) as exc:
            warnings.append(f"({profile}: states as last recorded — {exc})")
    return warnings


def _job(ref: str) -> Any:
    from .api import connect

    record = Registry().get(ref)
    return connect(record.profile).job(record)


def run(argv: list[str], shell: Any = None) -> Any:
    """Execute one ``%tiers`` command line (already split)."""
    try:
        args = build_parser().parse_args(argv)
    except _HelpShown:
        return None
    if args.command == "jobs":
        registry = Registry()
        records = registry.list(limit=args.limit, profile=args.profile)
        warnings = refresh_states(records)
        records = registry.list(limit=args.limit, profile=args.profile)
        print(format_jobs(records) if records else "no jobs yet")
        for warning in warnings:
            print(warning)
    elif args.command == "profiles":
        cfg = load_config()
        for name, prof in sorted(cfg.profiles.items()):
            mark = "*" if name == cfg.default_profile else " "
            where = prof.get("host") or prof.get("context") or "this machine"
            print(f"{mark} {name:<16} {prof.tier:<6} {where:<24} from {', '.join(prof.sources)}")
    elif args.command == "logs":
        print(_job(args.job).logs(rank=args.rank, tail=args.tail), end="")
    elif args.command == "cancel":
        job = _job(args.job)
        job.cancel()
        print(f"cancel requested for job {job.id} ({job.name})")
    elif args.command == "attach":
        from .display import show_job

        show_job(_job(args.job), wait=args.wait, text=args.text, attach=True)
    return None
