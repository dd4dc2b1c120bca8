"""``%tiers`` subcommands (also ``jupyter tiers``): jobs, attach, logs, stacks, cancel, delete, scale,
restart, promote and rollback (canaries and revisions), profiles — on training jobs and services alike —
history (Slurm accounting), doctor (first-contact checks of profiles) and init (write a profile
from what the machine knows)."""

from __future__ import annotations

import argparse
import time
from typing import Any, NoReturn

from ..api import connect
from ..app import actions, items
from ..app.ownjob import check_cancel
from ..batch.arrays import detail_counts, format_tasks, is_array
from ..batch.history import HistoryRow, format_history
from ..batch.stacks import STACKS_WAIT
from ..config.registry import JobRecord
from ..core.errors import Unsupported
from ..core.model import WorkKind
from ..core.plaintext import printable
from ..doctor.render import render_json, render_text
from ..engine.array_job import ArrayJob
from ..engine.handles import Handle, Job, Service
from ..spec.options import bare_dash_option
from .display import show_handle


class CommandUsage(Exception):
    """Bad subcommand or option; the magic turns it into a UsageError."""


class _HelpShown(Exception):
    """``-h``: argparse printed the help; nothing else to do."""


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # No abbreviations, in every subcommand: `--lim 5` was taken as `--limit 5`.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise CommandUsage(f"%tiers: {message}\n{self.format_usage().strip()}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if status == 0 and not message:
            raise _HelpShown()  # the help is already printed; do not print it again as an error
        raise CommandUsage(message or self.format_help())


def _int_up_to(high: int) -> Any:
    """An argparse type: a whole number of at most ``high`` in size (sqlite, deques and the
    Kubernetes API all need bounded integers); the sign is checked by the command."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
        if abs(value) > high:
            raise argparse.ArgumentTypeError(f"{text[:40]}: at most {high:,}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="%tiers", add_help=True)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    jobs = sub.add_parser("jobs", help="jobs and services of every tier, newest first")
    jobs.add_argument("--profile", "-p")
    jobs.add_argument("--limit", type=_int_up_to(1_000_000), default=20)
    jobs.add_argument("--kind", choices=[k.value for k in WorkKind])
    jobs.add_argument("job", nargs="?", help="an array's id: one row per task")
    attach = sub.add_parser("attach", help="show the live view of a job or service")
    attach.add_argument("job", help="job id, service name, or profile/id")
    attach.add_argument("--text", action="store_true")
    attach.add_argument("--wait", action="store_true")
    logs = sub.add_parser("logs", help="print a job's or service's log")
    logs.add_argument("job")
    which = logs.add_mutually_exclusive_group()
    which.add_argument("--rank", type=_int_up_to(1_000_000), help="one rank of a job")
    which.add_argument("--pod", help="one pod of a service")
    logs.add_argument("--tail", type=_int_up_to(100_000_000))
    logs.add_argument("--task", type=_int_up_to(4_000_000), help="one task of an array (or ID_TASK)")
    cancel = sub.add_parser("cancel", help="cancel a job (an array's every task; ID_TASK one task)")
    cancel.add_argument("job")
    cancel.add_argument("--task", type=_int_up_to(4_000_000), help="one task of an array (or ID_TASK)")
    stacks = sub.add_parser("stacks", help="every running rank's Python stack (all threads) of a "
                            "job, taken at one moment and grouped by identical stack")
    stacks.add_argument("job")
    stacks.add_argument("--task", type=_int_up_to(4_000_000), help="one task of an array (or ID_TASK)")
    stacks.add_argument("--timeout", type=_int_up_to(600), default=int(STACKS_WAIT),
                        help=f"seconds to wait for the ranks' answers (default {int(STACKS_WAIT)})")
    delete = sub.add_parser("delete", help="delete a service and everything it made")
    delete.add_argument("job")
    forget = sub.add_parser("forget", help="drop a job or service whose profile no longer exists from "
                            "the list (nothing can check it)")
    forget.add_argument("job")
    scale = sub.add_parser("scale", help="set a service's replicas")
    scale.add_argument("job")
    scale.add_argument("replicas", type=_int_up_to(100_000))
    restart = sub.add_parser("restart", help="roll every pod of a service")
    restart.add_argument("job")
    promote = sub.add_parser("promote", help="make a service's canary (--canary) the whole service")
    promote.add_argument("job")
    rollback = sub.add_parser("rollback", help="remove a service's canary, else roll a Kubernetes service "
                              "back to an earlier revision of its Deployment (default: the previous one)")
    rollback.add_argument("job")
    rollback.add_argument("--to", dest="revision", type=_int_up_to(1_000_000), metavar="REVISION",
                          help="the revision to go back to (the widget and the summary line show it)")
    sub.add_parser("profiles", help="list the configured profiles")
    login = sub.add_parser("login", help="connect a Slurm profile now (a login node's one-time "
                           "code is asked here; every job, watcher and log then shares it)")
    login.add_argument("--profile", "-p")
    history = sub.add_parser("history", help="jobs from Slurm accounting (sacct), any submitter")
    history.add_argument("--profile", "-p", help="a Slurm profile (default: the default profile)")
    history.add_argument("--days", "-d", type=_int_up_to(1_000_000), default=7,
                         help="jobs active in the last N days (1 to 366; default 7)")
    history.add_argument("--user", "-u", help="a user name, or 'all' (default: the login user)")
    history.add_argument("--state", "-s", action="append",
                         help="jobs that were in these states in the window, e.g. FAILED,TIMEOUT")
    history.add_argument("--limit", type=_int_up_to(1_000_000), default=50,
                         help="newest N jobs (default 50)")
    history.add_argument("--job", "-j", help="one job (123 or 123_4), with its output's last lines")
    history.add_argument("--tail", type=_int_up_to(100_000), default=20,
                         help="with --job: lines of output to show (default 20)")
    doctor = sub.add_parser("doctor", help="check profiles: reach, login, scheduler, permissions, "
                            "workdir, Python (read-only; one line per check)")
    doctor.add_argument("profiles", nargs="*", metavar="PROFILE",
                        help="profiles to check (default: the default profile)")
    doctor.add_argument("--profile", "-p", action="append", dest="named", metavar="PROFILE",
                        help="a profile to check (as history and login take it; repeatable)")
    doctor.add_argument("--json", action="store_true", help="the report as JSON, for scripts")
    doctor.add_argument("--suggest-role", action="store_true",
                        help="Kubernetes: print the Role that would grant the missing access")
    doctor.add_argument("--compute", action="store_true",
                        help="Slurm: also run the setup and Python on one compute node (srun, "
                        "a one-minute job; waits at most a minute for a free node)")
    init = sub.add_parser("init", help="write a profile into ~/.jupyter/tiers.yaml from ~/.ssh/config, "
                          "known_hosts and the kubeconfig (asks only what they do not say)")
    # lazy: heavy: PyYAML, only for `tiers init`
    from ..tools.profile_init.command import add_arguments

    add_arguments(init)
    return parser


def _init(args: argparse.Namespace, shell: Any) -> int:
    """``init``: prompts on a terminal; in a notebook none, and it writes only with --yes."""
    # lazy: heavy: PyYAML, only for `tiers init`
    from ..tools.profile_init.command import run_init

    return run_init(args, notebook=shell is not None)


def _doctor(args: argparse.Namespace) -> int:
    """Run the checks and print the report; 1 when any check failed."""
    report = actions.doctor([*args.profiles, *(args.named or [])], suggest_role=args.suggest_role,
                            compute=args.compute)
    print(render_json(report) if args.json else render_text(report))
    return int(report.exit_status)


def format_jobs(records: list[JobRecord], now: float | None = None) -> str:
    """A fixed-width table of registry records (pure, for tests). SIZE is a job's ranks or a
    service's ready/desired replicas; WHERE its nodes or endpoint; a requeued job's STATE says
    how many times it started again."""
    now = now or time.time()
    header = ("ID", "KIND", "NAME", "PROFILE", "TIER", "STATE", "SIZE", "WHERE", "STARTED")
    rows: list[tuple[str, ...]] = [header]
    for r in records:
        age = int(now - r.submitted_at)
        ago = f"{age // 3600}h ago" if age >= 3600 else f"{age // 60}m ago" if age >= 60 else f"{age}s ago"
        if r.kind == WorkKind.SERVICE:
            size, where = r.detail or "-", r.nodelist or "-"
        else:
            counts = detail_counts(r.detail) if is_array(r) else None
            size, where = counts or str(r.world_size), r.nodelist or "-"
        state = r.state
        if r.kind != WorkKind.SERVICE and r.restarts:
            state += f" ({r.restarts} restart{'s' if r.restarts > 1 else ''})"
        # Recorded cluster text (nodelist, state detail) is shown as text, like every cell.
        rows.append(tuple(printable(c) for c in (r.job_id, r.kind, r.name, r.profile, r.tier, state, size,
                                                 where, ago)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in rows)


def _history_output(row: HistoryRow, output: str | None, path: str, tail: int) -> str:
    """What follows one job's history row: where to look further, or its output's end."""
    if row.ours:
        return f"(submitted by jupyter-tiers: %tiers attach {row.key} / %tiers logs {row.key})"
    if output is None:
        where = path or "(no working directory in accounting)"
        return (f"(read-only; its output is not readable at {where}: removed, written elsewhere "
                "with --output after slurmctld forgot the job, or another user's file)")
    text = printable(output, keep="\n\t")
    return f"--- last {tail} lines of {path} (read-only) ---\n{text.rstrip()}"


def _handle(ref: str, kind: WorkKind | None = None) -> Handle:
    """The Job or Service handle of ``ref``; ``kind`` names what the command acts on."""
    try:
        return actions.attach(ref, kind)
    except actions.WrongKind as exc:  # also an array's task (ID_i), which has no record
        raise CommandUsage(
            f"%tiers: {ref} is a {exc.kind}, not a {kind}; use %tiers {exc.verb} {ref}") from None


def _login(profile: str | None) -> str:
    """Connect the profile's cached tier now (asking for a one-time code if its host wants one)."""
    try:
        return connect(profile).login()
    except Unsupported as exc:
        raise CommandUsage(f"%tiers login: {exc}") from None


def run(argv: list[str], shell: Any = None) -> Any:
    """Execute one ``%tiers`` command line (already split)."""
    option = bare_dash_option(argv)
    if option is not None:
        raise CommandUsage(f"%tiers: {option}: '--' is not a value; give the value after {option}")
    try:
        args = build_parser().parse_args(argv)
    except _HelpShown:
        return None
    if getattr(args, "task", None) is not None:  # --task 7: the array's task ID_7
        if args.task < 0 or "_" in args.job:
            raise CommandUsage(f"%tiers {args.command}: --task takes a task number of 0 or more, "
                               "with an array's id (or write ID_TASK without --task)")
        args.job = f"{args.job}_{args.task}"
    if args.command == "jobs" and args.job is not None:
        handle = _handle(args.job, WorkKind.JOB)
        if not isinstance(handle, ArrayJob):
            print(format_jobs([handle.record]))
            if isinstance(handle, Job):
                reason = actions.end_reason(handle)
                if reason is not None:  # "why: … — fix: …"
                    print(printable(reason))
            return None
        tasks = handle.task_statuses()
        _failures, metrics = handle.task_results(tasks)
        print(format_jobs([handle.recorded()]))
        print(format_tasks(handle.plan, tasks, metrics))
    elif args.command == "jobs":
        note = items.inside_job_note()
        if note:
            print(note)
        listing = actions.list_items(limit=args.limit, profile=args.profile,
                                     kind=WorkKind(args.kind) if args.kind else None)
        print(format_jobs(listing.records) if listing.records else "no jobs yet")
        for error in listing.errors:
            print(printable(f"({error.profile}: states as last recorded — {error.message})"))
    elif args.command == "profiles":
        infos, _default = actions.profiles()
        tier_width = max([6, *(len(p.tier) for p in infos)])
        where_width = max([24, *(len(p.where) for p in infos)])
        for p in infos:
            mark = "*" if p.default else " "
            print(printable(f"{mark} {p.name:<16} {p.tier:<{tier_width}} {p.where:<{where_width}} "
                            f"from {', '.join(p.sources)}"))
            if p.description:  # the file's own words for people; one line, shown as text
                print(printable("    " + " ".join(p.description.split())[:200]))
    elif args.command == "logs":
        if args.tail is not None and args.tail < 0:
            raise CommandUsage(f"%tiers logs --tail {args.tail}: give 0 or more lines")
        handle = _handle(args.job)
        if isinstance(handle, Job):
            if args.pod is not None:
                raise CommandUsage(f"%tiers logs: {args.job} is a job; use --rank N, not --pod")
            if args.rank is None and args.tail is None:  # a whole log: printed as it arrives
                for piece in handle.iter_logs():
                    print(piece, end="")
                return None
            text = handle.logs(rank=args.rank, tail=args.tail)
        else:
            assert isinstance(handle, Service)
            if args.rank is not None:
                raise CommandUsage(f"%tiers logs: {args.job} is a service; use --pod NAME, not --rank")
            text = handle.logs(pod=args.pod, tail=args.tail)
        print(text, end="")
    elif args.command == "stacks":
        if args.timeout < 1:
            raise CommandUsage(f"%tiers stacks --timeout {args.timeout}: give 1 to 600 seconds")
        _handle(args.job, WorkKind.JOB)
        print(printable(str(actions.stacks(args.job, timeout=args.timeout)), keep="\n\t"), end="")
    elif args.command == "rollback":
        if args.revision is not None and args.revision < 1:
            raise CommandUsage(f"%tiers rollback --to {args.revision}: give a revision from 1")
        _handle(args.job, WorkKind.SERVICE)
        print(actions.rollback(args.job, args.revision).message)
    elif args.command in ("cancel", "delete", "scale", "restart", "promote"):
        kind = WorkKind.JOB if args.command == "cancel" else WorkKind.SERVICE
        if args.command == "scale" and args.replicas < 0:
            raise CommandUsage("%tiers scale: replicas must be 0 or more")
        if args.command == "cancel":
            check_cancel(args.job)  # the job this notebook runs inside: OwnJob, before "no job N"
        _handle(args.job, kind)  # a record of the other kind is a usage error naming the verb
        if args.command == "scale":
            result = actions.scale(args.job, args.replicas)
        else:
            result = getattr(actions, args.command)(args.job)
        print(result.message)
    elif args.command == "forget":
        print(actions.forget(args.job).message)
    elif args.command == "history":
        if args.tail < 0:
            raise CommandUsage(f"%tiers history --tail {args.tail}: give 0 or more lines")
        found = actions.history(args.profile, days=args.days, user=args.user, state=args.state,
                                limit=args.limit, job=args.job, tail=args.tail if args.job else None)
        if not found.rows:
            print(f"no job {args.job} in {found.profile}'s accounting" if args.job else
                  f"no jobs in the last {args.days} day{'s' if args.days != 1 else ''} ({found.profile})")
        else:
            print(format_history(found.rows))
            if args.job and len(found.rows) == 1:
                print(_history_output(found.rows[0], found.output, found.output_path, args.tail))
            elif not all(r.ours for r in found.rows):
                print("(FROM other: not submitted by jupyter-tiers; read-only: "
                      "%tiers history --job ID shows one with its output)")
    elif args.command == "login":
        print(_login(args.profile))
    elif args.command == "init":
        status = _init(args, shell)
        return status if shell is None else None
    elif args.command == "doctor":
        status = _doctor(args)
        return status if shell is None else None  # the command line's exit status
    elif args.command == "attach":
        show_handle(_handle(args.job), wait=args.wait, text=args.text, attach=True)
    return None
