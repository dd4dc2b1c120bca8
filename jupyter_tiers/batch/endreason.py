"""Why a job ended, in one line with the fix (pure).

:func:`why_ended` reads the failing rank's last log lines (texts without the ``R: `` prefix, and
Slurm's own lines of the job) and what the job's record and status say (:class:`EndFacts`: its
state, which ranks had finished, its memory peak against its ``--mem``, the last step against
the planned steps) and returns an :class:`EndReason`, shown as one line::

    why: rank 3 (node2) ran out of GPU memory (79.14 GiB in use of 79.15 GiB; ...) — fix: lower ...
    why: killed by Slurm for using more memory ...: MaxRSS 15.8G of --mem 16G — fix: ask for --mem 32G, ...

or None when nothing it knows explains the end (and for a job that completed, was cancelled or
was preempted: their cause is known). The cases, first match wins: CUDA out of memory;
a Slurm/cgroup OOM kill; /dev/shm too small for shared memory (DataLoader workers, NCCL, a model
server); ``Address already in use`` on the rendezvous port; a module that sits
beside the notebook not found on the cluster; NCCL/gloo collective timeouts and watchdog aborts
(naming the rank that stopped answering when the lines or the status tell); torch's
``terminate called without an active exception`` at exit after every rank's work was done (the
process group was never destroyed); a TIMEOUT with the last step reached against the planned;
failing all of these, the failing rank's line that explains its crash (core.rootcause: the first
error of its last traceback chain, not the traceback's last line), without a fix.
No I/O: the callers (engine.handles.Job.end_reason, the views) gather the lines and the facts.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.model import JobState, JobStatus, RankPhase
from ..core.rootcause import root_cause
from .logs import split_log_line

MAX_LINES = 200  # of the failing rank's last lines, the ones read
TAIL_LINES = 60  # lines LogTail keeps of each rank (and of the lines without a rank)
MAX_TAIL_RANKS = 4096  # ranks LogTail keeps lines of (a bigger job: the first 4096 seen)
_MAX_LEN = 2000  # characters of one line read (a progress bar's line can be megabytes)
_MAX_SHOWN = 160  # characters of a name or port taken from a line into the reason

_SIZE = r"(\d{1,9}(?:\.\d{1,4})?\s?[KMGTP]i?B)"
_CUDA_OOM = re.compile(r"CUDA out of memory|CUDA error: out of memory|HIP out of memory|"
                       r"CUBLAS_STATUS_ALLOC_FAILED|OutOfMemoryError", re.IGNORECASE)
_CUDA_ASKED = re.compile(r"Tried to allocate " + _SIZE)
_CUDA_IN_USE = re.compile(r"this process has " + _SIZE + r" memory in use|" + _SIZE + r" already allocated")
_CUDA_TOTAL = re.compile(r"total capacity of " + _SIZE + r"|" + _SIZE + r" total capacity")
_CGROUP_OOM = re.compile(r"oom[-_ ]kill|OOM Killed|Out Of Memory|memory cgroup out of memory|"
                         r"Exceeded job memory limit", re.IGNORECASE)
_ADDR_IN_USE = re.compile(r"address already in use|EADDRINUSE|Errno 98\b", re.IGNORECASE)
_PORT = re.compile(r"\bport[:= ]\s?(\d{2,5})\b|:(\d{2,5})\b")
_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]{1,200})'")
_WATCHDOG = re.compile(r"Watchdog caught collective operation timeout|watchdog thread terminated|"
                       r"collective operation timeout|NCCL (?:communicator was aborted|timeout)|"
                       r"Some NCCL operations have failed or timed out|failed to pass monitoredBarrier",
                       re.IGNORECASE)
_GLOO = re.compile(r"gloo.{0,200}(?:Timed out|Connection closed by peer|Connection reset by peer|Read error)|"
                   r"Timed out waiting \d{1,12}ms for (?:recv|send) operation|"
                   r"(?:Connection closed by peer|Connection reset by peer).{0,200}gloo", re.IGNORECASE)
_NAMED_RANK = re.compile(r"(?:from|to|peer|by) rank (\d{1,6})\b|"
                         r"\bRank (\d{1,6}) failed to pass monitoredBarrier", re.IGNORECASE)
_TERMINATE = "terminate called without an active exception"
_TRACEBACK = "Traceback (most recent call last):"
_STEP_OF = re.compile(r"\bstep[\s:=]{1,3}(\d{1,12})\s?/\s?(\d{1,12})\b|\b(\d{1,12})/(\d{1,12}) \[",
                      re.IGNORECASE)
# Ends whose cause is known without the lines: it completed, someone cancelled it, the
# scheduler preempted it (an error line from before then is not why it ended).
_NOT_EXPLAINED = frozenset({JobState.COMPLETED, JobState.CANCELLED, JobState.PREEMPTED})
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


@dataclass(frozen=True)
class EndReason:
    """Why a job ended (``why``) and what to change (``fix``); :attr:`line` is the one line shown."""

    why: str
    fix: str

    @property
    def line(self) -> str:
        """``why: … — fix: …``; without a fix (a crash of no known cause) the line that explains
        the crash, as it stands, in the place of a log's first error line."""
        return f"why: {self.why} — fix: {self.fix}" if self.fix else self.why


@dataclass(frozen=True)
class EndFacts:
    """What the job's record and status say about its end (any of it may be unknown).

    ``failed_rank``/``failed_node``: the first rank that failed. ``all_work_done``: every rank's
    program had reached its end (each rank exited, or ended only by an abort at exit).
    ``silent_ranks``: ranks seen to stop before the failure, the suspects of a collective
    timeout. ``max_rss``/``mem``: bytes, the job's peak and its ``--mem``. ``last_step``/
    ``planned_steps``: how far training got. ``beside_notebook``: top-level module names of the
    ``.py`` files and packages beside the notebook; ``synced``: the job had ``--sync``.
    """

    state: JobState
    exit_code: int | None = None
    failed_rank: int | None = None
    failed_node: str | None = None
    all_work_done: bool = False
    silent_ranks: tuple[int, ...] = ()
    max_rss: int | None = None
    mem: int | None = None
    time_limit: str | None = None
    last_step: float | None = None
    planned_steps: int | None = None
    rdzv_port: int | None = None
    beside_notebook: frozenset[str] = field(default_factory=frozenset)
    synced: bool = False


def parse_size(text: str) -> int | None:
    """``79.14 GiB``, ``20.00 MiB``, ``512 KB`` -> bytes (binary units), None when not a size."""
    m = re.fullmatch(r"\s*(\d{1,15}(?:\.\d{1,6})?)\s*([KMGTP]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not m:
        return None
    return int(float(m[1]) * _UNITS[m[2].upper()])


def parse_mem(text: object) -> int | None:
    """Slurm's ``--mem`` (``4000`` MB, ``16G``, ``512M``) -> bytes, None when not one."""
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        return None
    m = re.fullmatch(r"\s*(\d{1,15})([KMGT]?)B?\s*", str(text), re.IGNORECASE)
    if not m:
        return None
    return int(m[1]) * _UNITS[m[2].upper() or "M"]


def format_size(value: int) -> str:
    """Bytes as ``15.8G``, ``512M``, ``900K``."""
    size = float(max(0, value))
    for unit in ("B", "K", "M", "G"):
        if size < 1024:
            return (f"{size:.0f}" if unit == "B" or size >= 100 else f"{size:.1f}".removesuffix(".0")) + unit
        size /= 1024
    return (f"{size:.0f}" if size >= 100 else f"{size:.1f}".removesuffix(".0")) + "T"


def _mem_option(value: int) -> str:
    """A ``--mem`` value for ``value`` bytes, rounded up to whole GiB (or MiB below 1 GiB)."""
    if value >= 1 << 30:
        return f"{-(-value // (1 << 30))}G"
    return f"{max(1, -(-value // (1 << 20)))}M"


def _who(facts: EndFacts) -> str:
    if facts.failed_rank is None:
        return "a rank"
    return f"rank {facts.failed_rank}" + (f" ({facts.failed_node[:_MAX_SHOWN]})" if facts.failed_node else "")


def why_ended(lines: Sequence[str], facts: EndFacts) -> EndReason | None:
    """Why the job ended and what to change, or None (see the module docstring).
    ``lines``: the failing rank's last lines, oldest first, and Slurm's own lines of the job."""
    if facts.state in _NOT_EXPLAINED or not facts.state.terminal:
        return None
    text = [line[:_MAX_LEN] for line in list(lines)[-MAX_LINES:]]
    for check in (_cuda_oom, _cgroup_oom, _shm, _addr_in_use, _no_module, _collective_timeout,
                  _terminate_at_exit, _time_limit, _crash_line):
        found = check(text, facts)
        if found is not None:
            return found
    return None


def _cuda_oom(lines: list[str], facts: EndFacts) -> EndReason | None:
    hit = next((line for line in reversed(lines) if _CUDA_OOM.search(line)), None)
    if hit is None:
        return None
    bits = []
    used, total, asked = _CUDA_IN_USE.search(hit), _CUDA_TOTAL.search(hit), _CUDA_ASKED.search(hit)
    if used:
        bits.append(f"{used[1] or used[2]} in use" + (f" of {total[1] or total[2]}" if total else ""))
    if asked:
        bits.append(f"{asked[1]} more asked")
    detail = f" ({'; '.join(bits)})" if bits else ""
    return EndReason(f"{_who(facts)} ran out of GPU memory{detail}",
                     "lower the batch size (or accumulate gradients), use bf16/fp16 or activation "
                     "checkpointing, or shard the model (FSDP)")


def _cgroup_oom(lines: list[str], facts: EndFacts) -> EndReason | None:
    said = any(_CGROUP_OOM.search(line) for line in lines)
    near = facts.max_rss is not None and bool(facts.mem) and facts.max_rss >= 0.95 * (facts.mem or 0)
    if not (facts.state is JobState.OUT_OF_MEMORY or said or (near and facts.state is not JobState.TIMEOUT)):
        return None
    if facts.max_rss is not None and facts.mem:
        used = f": MaxRSS {format_size(facts.max_rss)} of --mem {format_size(facts.mem)}"
        more = f"--mem {_mem_option(max(facts.mem * 2, facts.max_rss * 3 // 2))}"
    elif facts.max_rss is not None:
        used, more = f": MaxRSS {format_size(facts.max_rss)}", "a larger --mem"
    elif facts.mem:
        used, more = f" (--mem {format_size(facts.mem)})", f"--mem {_mem_option(facts.mem * 2)}"
    else:
        used, more = "", "a larger --mem"
    return EndReason(f"killed by Slurm for using more memory than it asked for{used}",
                     f"ask for {more}, or use less per node (fewer --ntasks-per-node or DataLoader "
                     "workers, load data lazily)")


_SHM = re.compile(r"/dev/shm|shared memory \(shm\)|out of shared memory|shared memory limit|"
                  r"shared memory segment", re.IGNORECASE)


def _shm(lines: list[str], facts: EndFacts) -> EndReason | None:
    hit = next((line for line in reversed(lines) if _SHM.search(line)), None)
    if hit is None:
        return None
    cause = root_cause([hit])
    detail = f" ({cause.detail})" if cause is not None and cause.detail else ""
    node = f" on {facts.failed_node[:_MAX_SHOWN]}" if facts.failed_node else ""
    return EndReason(f"{_who(facts)}: /dev/shm{node} was too small for its shared memory{detail}",
                     "use fewer DataLoader workers (num_workers) or "
                     "torch.multiprocessing.set_sharing_strategy('file_system'); in a container "
                     "(enroot, Apptainer) give it the node's /dev/shm; else ask the admins for more")


def _crash_line(lines: list[str], facts: EndFacts) -> EndReason | None:
    """The failing rank's line that explains its crash, when nothing above knew the cause (no
    fix: the line itself is what to read)."""
    if facts.state is JobState.TIMEOUT:
        return None
    cause = root_cause(lines)
    return EndReason(cause.line, "") if cause is not None else None


def _addr_in_use(lines: list[str], facts: EndFacts) -> EndReason | None:
    hit = next((line for line in reversed(lines) if _ADDR_IN_USE.search(line)), None)
    if hit is None:
        return None
    port = facts.rdzv_port
    m = _PORT.search(hit)
    if m:
        port = int(m[1] or m[2])
    where = f" {port}" if port else ""
    node = f" on {facts.failed_node[:_MAX_SHOWN]}" if facts.failed_node else ""
    return EndReason(f"the rendezvous port{where} was already in use{node} (another job or a "
                     "leftover process holds it)",
                     "leave --rdzv-port out (the port is then picked from the job id) or give a "
                     "free one, and look for stray processes of an earlier run on the node")


def _no_module(lines: list[str], facts: EndFacts) -> EndReason | None:
    hit = next((m for line in reversed(lines) if (m := _NO_MODULE.search(line))), None)
    if hit is None:
        return None
    name = hit[1][:_MAX_SHOWN]
    top = name.split(".")[0]
    why = f"{_who(facts)}: No module named '{name}'"
    if top in facts.beside_notebook:
        if facts.synced:
            return EndReason(f"{why}, though {top} sits beside the notebook and --sync was given",
                             f"add {top}'s folder to --sync (or put it on PYTHONPATH in the job)")
        return EndReason(f"{why}: {top} sits beside the notebook but is not on the cluster",
                         "run with --sync . (or --sync the folder it is in)")
    return EndReason(f"{why} on the cluster",
                     "install it in the job's environment (the profile's setup or python), or "
                     "--sync it if it is your code")


def _collective_timeout(lines: list[str], facts: EndFacts) -> EndReason | None:
    watchdog = any(_WATCHDOG.search(line) for line in lines)
    if not watchdog and not any(_GLOO.search(line) for line in lines):
        return None
    named = [int(m[1] or m[2]) for line in lines for m in _NAMED_RANK.finditer(line)]
    suspects = [r for r in dict.fromkeys(named + list(facts.silent_ranks)) if r != facts.failed_rank]
    kind = ("the NCCL watchdog aborted a collective that timed out" if watchdog
            else "a gloo collective timed out")
    same = "every rank must call the same collectives in the same order"
    if suspects:
        shown = ", ".join(map(str, suspects[:5])) + (" ..." if len(suspects) > 5 else "")
        who = f"rank{'s' if len(suspects) > 1 else ''} {shown} stopped answering"
        fix = f"read rank {suspects[0]}'s last lines (crashed, hung, or took another code path: {same})"
    else:
        who = "a peer stopped answering"
        fix = (f"find the rank whose log stops first (crashed, hung, or took another code path: "
               f"{same}); raise timeout= in init_process_group only for steps that are long by design")
    return EndReason(f"{_who(facts)}: {kind}: {who}", fix)


def _terminate_at_exit(lines: list[str], facts: EndFacts) -> EndReason | None:
    at = next((i for i in range(len(lines) - 1, -1, -1) if _TERMINATE in lines[i]), None)
    if at is None or not facts.all_work_done or any(_TRACEBACK in line for line in lines[:at]):
        return None
    return EndReason(f"{_who(facts)} aborted at exit (terminate called without an active exception) "
                     "after every rank had finished its work: torch 2.x aborts at exit when the "
                     "process group is not destroyed",
                     "call dist.destroy_process_group() at the end of the script")


def _time_limit(lines: list[str], facts: EndFacts) -> EndReason | None:
    if facts.state is not JobState.TIMEOUT:
        return None
    last, planned = facts.last_step, facts.planned_steps
    for line in reversed(lines):
        m = _STEP_OF.search(line)
        if m:
            done, total = int(m[1] or m[3]), int(m[2] or m[4])
            if total > 0 and done <= total:
                last = last if last is not None else done
                planned = planned or total
                break
    limit = f" ({facts.time_limit[:40]})" if facts.time_limit else ""
    if last is not None and planned:
        share = min(100.0, 100.0 * last / planned)
        need = f"about {planned / last:.1f}× the time" if last > 0 else "more time"
        return EndReason(f"hit the time limit{limit} at step {last:g} of {planned} ({share:.0f} %)",
                         f"ask for {need} (--time), or resume from a checkpoint in a follow-up job")
    where = f" at step {last:g}" if last is not None else ""
    return EndReason(f"hit the time limit{limit}{where} (the planned steps are not known)",
                     "ask for more --time, or checkpoint and resume in a follow-up job")


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def facts_of(status: JobStatus, spec: Mapping[str, Any] | None = None, *,
             max_rss: int | None = None, last_step: float | None = None,
             beside_notebook: Iterable[str] = ()) -> EndFacts:
    """The :class:`EndFacts` of a finished job's status and its record's spec (``mem``,
    ``time``, ``sync``, ``rdzv_port``). The planned steps are not an option: the classifier
    reads them from the lines (``step 40/100``, a progress bar's ``370/1000 [``)."""
    spec = spec or {}
    first = status.first_failure
    ranks = status.ranks
    failed = [r for r in ranks if r.phase is RankPhase.FAILED]
    # Every rank reached its end: each exited, aborted at exit (SIGABRT), or was stopped by the
    # fail-stop that followed such an abort; a rank that failed otherwise did not finish.
    done = bool(failed) and all(r.signal == 6 or r.exit_code in (134, -6) for r in failed) and all(
        r.phase in (RankPhase.EXITED, RankPhase.FAILED, RankPhase.STOPPED) for r in ranks)
    silent: list[int] = []
    if first is not None and first.ended_at is not None:
        silent = [r.rank for r in ranks if r.rank != first.rank and r.ended_at is not None
                  and r.ended_at < first.ended_at and r.phase is not RankPhase.STOPPED]
    if first is not None and not silent and len(ranks) == 2:
        silent = [r.rank for r in ranks if r.rank != first.rank]  # a pair: the other one
    time_limit = spec.get("time")
    return EndFacts(
        state=status.state, exit_code=status.exit_code,
        failed_rank=None if first is None else first.rank,
        failed_node=None if first is None else first.node or None,
        all_work_done=done, silent_ranks=tuple(silent), max_rss=max_rss,
        mem=parse_mem(spec.get("mem")),
        time_limit=str(time_limit) if isinstance(time_limit, (str, int)) and time_limit else None,
        last_step=last_step,
        rdzv_port=_int(spec.get("rdzv_port")),
        beside_notebook=frozenset(beside_notebook), synced=bool(spec.get("sync")))


class LogTail:
    """The last :data:`TAIL_LINES` lines of each rank of a merged log (``R: `` prefixes), and of
    the lines without a rank (Slurm's own), fed as the log is read."""

    def __init__(self, keep: int = TAIL_LINES) -> None:
        self.keep = keep
        self._by_rank: dict[int | None, deque[str]] = {}

    def feed(self, rank: int | None, text: str) -> None:
        """Keep one line of ``rank`` (None: a line without a rank)."""
        tail = self._by_rank.get(rank)
        if tail is None:
            if len(self._by_rank) >= MAX_TAIL_RANKS:
                return
            tail = self._by_rank[rank] = deque(maxlen=self.keep)
        tail.append(text[:_MAX_LEN])

    def feed_text(self, text: str) -> None:
        """Read a block of raw merged-log text (whole lines)."""
        for raw in text.splitlines():
            self.feed(*split_log_line(raw))

    def has(self, rank: int | None) -> bool:
        """Whether any line of ``rank`` was kept."""
        return bool(self._by_rank.get(rank))

    def lines_of(self, rank: int | None) -> list[str]:
        """``rank``'s last lines then the rank-less ones (rank 0's when ``rank`` is None)."""
        own = list(self._by_rank.get(0 if rank is None else rank, ()))
        return own + list(self._by_rank.get(None, ()))


def needs_beside_notebook(lines: Iterable[str]) -> bool:
    """Whether the lines hold a ModuleNotFoundError (then the caller lists the notebook's folder)."""
    return any("ModuleNotFoundError" in line for line in lines)


def module_names(entries: Iterable[tuple[str, bool]]) -> frozenset[str]:
    """Importable top-level names among a folder's entries ``(name, is_dir)``: ``x.py`` files
    and folders named as identifiers (packages, or namespace packages)."""
    names = set()
    for name, is_dir in entries:
        if is_dir and name.isidentifier():
            names.add(name)
        elif not is_dir and name.endswith(".py") and name[:-3].isidentifier():
            names.add(name[:-3])
    return frozenset(names)
