"""Job history, the tier capability's pure half: the query and its checks, the row model and
the table (values in, values out; no scheduler's syntax).

A batch tier that keeps accounting answers :meth:`~jupyter_tiers.engine.tier.BatchTier.history`
with :class:`HistoryRow` values (the Slurm tier from one ``sacct`` call, see
:mod:`jupyter_tiers.slurm.history`); the REST parameters, ``%tiers history`` and
``jupyter tiers history`` check their values and draw the table with what is here. Every
value that reaches a remote command is validated first: days are bounded, the user is a plain
login name, states come from a fixed list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..core.errors import SpecError, TiersError
from ..core.plaintext import printable
from ..core.timefmt import format_elapsed

MAX_DAYS = 366
DEFAULT_DAYS = 7
DEFAULT_LIMIT = 50
MAX_LIMIT = 10_000
#: The most output lines one history job's tail may ask for.
MAX_TAIL = 100_000
#: ``--user all``: every user's jobs (what the cluster lets this account see).
ALL_USERS = "all"

#: States a history can be filtered by (sacct's names) and the short codes accepted for them.
STATES = ("PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT",
          "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "REQUEUED")
_STATE_CODES = {"PD": "PENDING", "R": "RUNNING", "S": "SUSPENDED", "CD": "COMPLETED",
                "CA": "CANCELLED", "F": "FAILED", "TO": "TIMEOUT", "NF": "NODE_FAIL",
                "PR": "PREEMPTED", "BF": "BOOT_FAIL", "DL": "DEADLINE", "OOM": "OUT_OF_MEMORY",
                "RQ": "REQUEUED"}

# POSIX portable user names (useradd's default rule, plus upper case some sites use).
_USER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
JOB_REF_RE = re.compile(r"\d{1,20}(?:_\d{1,10})?")


class AccountingDisabled(TiersError):
    """The cluster keeps no job accounting, so there is no history to ask."""


NO_ACCOUNTING_MESSAGE = (
    "no job history: Slurm accounting is off on this cluster (sacct: accounting storage is "
    "disabled); %tiers jobs still lists the jobs submitted from here")


def no_history_message(profile: str, backend: str) -> str:
    """Why a profile of ``backend`` (``local``, ``kubernetes``) has no job history."""
    return (f"{profile!r} is a {backend} tier; job history comes from Slurm accounting (sacct): "
            "use a Slurm profile, or %tiers jobs")


@dataclass(frozen=True)
class HistoryQuery:
    """What to ask sacct: jobs active in the last ``days``, of ``user`` (None: the login user;
    ``"all"``: everyone the account may see), in ``states`` (empty: any)."""

    days: int = DEFAULT_DAYS
    user: str | None = None
    states: tuple[str, ...] = ()
    limit: int = DEFAULT_LIMIT
    job_id: str | None = None  # one job, whenever it ran (days, user and states then unused)


def check_days(days: Any) -> int:
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
        raise SpecError("days", f"give a whole number of days from 1 to {MAX_DAYS}, got {days!r}"[:120])
    return days


def check_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise SpecError("limit", f"give a number of jobs from 1 to {MAX_LIMIT}, got {limit!r}"[:120])
    return limit


def check_user(user: Any) -> str | None:
    """A login name (letters, digits, ``_ . -``, at most 32, not starting with ``-``), ``all``
    for every user, or None for the login user."""
    if user is None:
        return None
    if not isinstance(user, str) or not _USER_RE.fullmatch(user):
        shown = repr(user)[:40]
        raise SpecError("user", f"{shown} is not a user name (letters, digits, _ . -; at most 32; "
                        f"or {ALL_USERS!r} for every user)")
    return user


def check_states(states: Any) -> tuple[str, ...]:
    """``"failed,TO"`` or a list -> sacct state names from :data:`STATES` (sorted, unique)."""
    if states is None:
        return ()
    words: list[str] = []
    items = [states] if isinstance(states, str) else states
    if not isinstance(items, (list, tuple)):
        raise SpecError("state", f"expected state names, got {type(states).__name__}")
    for item in items:
        if not isinstance(item, str):
            raise SpecError("state", f"expected state names, got {type(item).__name__}")
        words += [w.strip() for w in item.split(",") if w.strip()]
    out = set()
    for word in words:
        name = word.upper()
        name = _STATE_CODES.get(name, name)
        if name not in STATES:
            raise SpecError("state", f"{word[:40]!r} is not a job state; use one of "
                            f"{', '.join(STATES)} (or their short codes)")
        out.add(name)
    return tuple(sorted(out))


def check_job_ref(job: Any) -> str:
    """A job id (``123``) or an array task (``123_4``)."""
    if not isinstance(job, str) or not JOB_REF_RE.fullmatch(job):
        raise SpecError("job", f"{str(job)[:40]!r} is not a Slurm job id (123, or 123_4 for an array task)")
    return job


def make_query(days: Any = DEFAULT_DAYS, user: Any = None, states: Any = None,
               limit: Any = DEFAULT_LIMIT, job: Any = None) -> HistoryQuery:
    """A validated query (SpecError naming the bad value and what is allowed)."""
    return HistoryQuery(days=check_days(days), user=check_user(user), states=check_states(states),
                        limit=check_limit(limit), job_id=None if job is None else check_job_ref(job))


@dataclass(frozen=True)
class HistoryRow:
    """One job of the history. ``ours`` is True when this registry submitted it (then
    ``key`` is its registry key); other jobs (plain ``sbatch``, another tool) are read-only."""

    job_id: str  # the raw id, what squeue/scancel/the registry use
    display_id: str  # array tasks as 12_3
    name: str
    user: str
    state: str
    exit_code: int | None
    signal: int | None
    elapsed_s: int | None
    nodes: int | None
    nodelist: str
    max_rss: int | None  # bytes: the largest task of any step
    submit: str
    start: str
    end: str
    partition: str
    workdir: str
    ours: bool = False
    key: str = ""
    #: Who failed, when known: the first failed rank of a job this registry submitted
    #: (``rank 3 exit 1``, as its widget says), else a failed step whose exit differs from the
    #: job's (``step 0 exit 1``: the job's own ExitCode is its batch script's, e.g. 15 after the
    #: fail-stop's SIGTERM). Shown as the EXIT.
    failure: str = ""

    @property
    def exit(self) -> str:
        if self.failure:
            return self.failure
        if self.state.startswith("CANCELLED"):  # sacct's 0:0 would read as a success
            return "cancelled"
        if self.exit_code is None:
            return "-"
        return f"{self.exit_code}:{self.signal}" if self.signal else str(self.exit_code)

    @property
    def ref(self) -> str:
        """What scontrol and sacct take for this job: ``12_3`` for an array task, else the raw
        id (a pending array's ``12_[4-10]`` is not one job)."""
        return self.display_id if JOB_REF_RE.fullmatch(self.display_id) else self.job_id

    @property
    def default_log(self) -> str:
        """Where sbatch writes the output when no ``--output`` was given (sacct 22.05 does not
        report the real path): ``WORKDIR/slurm-ID.out``."""
        return f"{self.workdir.rstrip('/')}/slurm-{self.display_id}.out" if self.workdir else ""

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "exit": self.exit}


def mark_ours(rows: Iterable[HistoryRow], known: dict[str, str],
              failures: dict[str, str] | None = None) -> list[HistoryRow]:
    """Mark the rows whose job id this registry knows (``known``: job id -> registry key), with
    the first failed rank it recorded (``failures``: job id -> ``rank 3 exit 1``) as ``failure``."""
    failures = failures or {}
    out = []
    for r in rows:
        ref = registry_id(r, known)
        out.append(r if ref is None else
                   replace(r, ours=True, key=known[ref], failure=failures.get(ref) or r.failure))
    return out


def registry_id(row: HistoryRow, known: Mapping[str, str]) -> str | None:
    """The id under which ``known`` (the registry's job ids) holds ``row``, or None. An array
    task (``11_3``) is matched by itself or by its array's id, never by its raw id: Slurm gives
    one task of array 11 the raw id 11 and the others new numbers, so matching raw ids marked one
    task of an array ours and its siblings not."""
    array, sep, _ = row.display_id.partition("_")
    if sep:
        return next((i for i in (row.display_id, array) if i in known), None)
    return row.job_id if row.job_id in known else None


def format_bytes(value: int | None) -> str:
    """Bytes as ``512B``, ``15.9M``, ``1.5G`` (``-`` when unknown)."""
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "K", "M", "G"):
        if size < 1024:
            if unit == "B":
                return f"{int(size)}B"
            return f"{size:.1f}{unit}" if size < 100 else f"{size:.0f}{unit}"
        size /= 1024
    return f"{size:.1f}T"


HEADER = ("ID", "NAME", "USER", "STATE", "ELAPSED", "EXIT", "NODES", "MAX RSS", "SUBMITTED", "FROM")


def format_history(rows: Sequence[HistoryRow]) -> str:
    """A fixed-width table (pure). FROM says who submitted: ``tiers`` (this registry, full
    attach) or ``other`` (plain sbatch or another tool: read-only)."""
    table = [HEADER]
    for r in rows:
        nodes = f"{r.nodes} {r.nodelist}".strip() if r.nodes else (r.nodelist or "-")
        table.append((r.display_id, _cell(r.name), r.user or "-", r.state,
                      format_elapsed(r.elapsed_s) if r.elapsed_s is not None else "-", r.exit,
                      nodes, format_bytes(r.max_rss), r.submit.replace("T", " ") or "-",
                      "tiers" if r.ours else "other"))
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADER))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in table)


def _cell(text: str, width: int = 40) -> str:
    # Cluster text is shown as text: control characters would corrupt the table.
    clean = printable(text)
    return clean if len(clean) <= width else clean[: width - 1] + "…"
