"""Every running rank's Python stacks, taken at one moment and grouped (pure, no I/O).

How a stack is taken (the rank shim, ``jobdir.RANK_SHIM``, and :data:`BOOT_PY`):

- A Python cell runs through ``.rank-boot.py`` (``python .rank-boot.py main.py`` instead of
  ``python main.py``): before the cell starts it registers :mod:`faulthandler` for
  :data:`STACK_SIGNAL_NOTE` (a real-time signal nothing else uses: not Slurm's, not torchrun's,
  not one a user's ``--signal`` may name), writing every thread's stack into ``stacks/<rank>``,
  and records ``PID SIGNAL`` in ``stacks/.<rank>.boot``; then it runs the cell as ``__main__``
  (``runpy``), and an uncaught exception's traceback is printed without its own frames.
- Asking is one file for the whole job: ``stacks/request`` holds a new request id. Each rank's
  shim looks at it every second (no process started while nobody asks), and on a new id appends
  ``request ID TS NODE`` to ``stacks/<rank>``, signals its own program (only the pid the boot
  recorded, only while /proc says the program still catches the signal), waits for the dump to
  stop growing and appends ``end ID``; a rank that cannot answer writes ``none WHY`` instead.
  No scheduler call, no ptrace, no extra package; the write reaches every node through the job
  directory over whatever transport the tier has. faulthandler writes from the signal handler
  itself, so a rank whose C extension holds the GIL (a stuck collective) still answers, which a
  Python thread polling for the request could not.

This module builds the request id, reads the answers, parses faulthandler's text, maps the
cell's frames to the lines the user sees (the magic line is line 1 of the cell, so line N of
``main.py`` is cell line N + 1), hides our own frames, groups ranks by identical stacks and
renders them.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..core.model import RankPhase, RankState
from .arrays import compress_indices

STACKS_DIR = "stacks"
REQUEST_FILE = "request"
BOOT_FILE = ".rank-boot.py"
#: The cell's line N is the file's line N - CELL_LINE_OFFSET (the magic line is line 1).
CELL_LINE_OFFSET = 1
#: How long ``job.stacks()`` waits for every running rank's answer (the shims look each second).
STACKS_WAIT = 20.0
#: Bytes of a rank's answer file read back (its latest answers).
MAX_ANSWER_BYTES = 1 << 20
STACK_SIGNAL_NOTE = "SIGRTMAX-3"
_FILE_LIMIT = 1 << 20

#: The boot a Python rank runs through (written into the job directory as BOOT_FILE). Kept to
#: what every Python 3 has; nothing here may stop the cell from running.
BOOT_PY = '''# jupyter-tiers rank boot (batch/stacks.py): lets the notebook take this rank's Python stacks,
# then runs the cell as __main__ as `python main.py` would.
import faulthandler, os, runpy, signal, sys


def _jt_register():
    num = getattr(signal, "SIGRTMAX", None)
    folder = os.environ.get("JT_STACKS_DIR")
    rank = os.environ.get("RANK", "0")
    if num is None or not folder or not rank.isdigit():
        return None
    num = int(num) - 3
    try:
        # 0600 whatever the rank's umask (027, for checkpoints): the job's files stay private
        flags = os.O_WRONLY | os.O_CREAT
        out = os.fdopen(os.open(os.path.join(folder, rank), flags | os.O_APPEND, 0o600), "ab", buffering=0)
        faulthandler.register(num, file=out, all_threads=True, chain=False)
        tmp = os.path.join(folder, ".%s.boot.%d" % (rank, os.getpid()))
        with os.fdopen(os.open(tmp, flags | os.O_TRUNC, 0o600), "w") as mark:
            mark.write("%d %d\\n" % (os.getpid(), num))
        os.replace(tmp, os.path.join(folder, ".%s.boot" % rank))
    except Exception:  # whatever goes wrong here, the cell runs (without stacks)
        return None
    return out


def _jt_hook(kind, value, tb, _previous=sys.excepthook, _me=__file__):
    # the traceback the cell would have had under `python main.py`: without this file's and
    # runpy's frames
    while tb is not None and (tb.tb_frame.f_code.co_filename in (_me, "<frozen runpy>")
                              or tb.tb_frame.f_code.co_filename.endswith("/runpy.py")):
        tb = tb.tb_next
    if isinstance(value, BaseException):
        value.__traceback__ = tb  # what the default hook prints
    _previous(kind, value, tb)


_jt_stacks_file = _jt_register()
sys.excepthook = _jt_hook
del sys.argv[0]
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def request_id(now: float, token: str | None = None) -> str:
    """A new request's id: the time and a random token (words of letters, digits and dots)."""
    return f"{now:.3f}.{token or secrets.token_hex(4)}"


_ID_RE = re.compile(r"[0-9]{1,20}\.[0-9]{3}\.[0-9a-f]{1,32}")


def check_request_id(rid: str) -> str:
    if not _ID_RE.fullmatch(rid):
        raise ValueError(f"not a stacks request id: {rid[:60]!r}")
    return rid


@dataclass(frozen=True)
class Answer:
    """One rank's answer to one request: the dump's text, or why there is none."""

    at: float | None = None
    node: str | None = None
    dump: str = ""
    why: str | None = None
    complete: bool = True


def parse_answers(text: str, rid: str) -> tuple[dict[int, Answer], str | None]:
    """The stacks read-back (``@@ R`` then the tail of ``stacks/R``, for each rank; ``@@cell``
    then the cell's file) -> rank -> its answer to request ``rid`` (only ranks that have
    finished answering, ``end ID`` seen), and the cell's text (None when absent).
    Arbitrary text never raises."""
    answers: dict[int, Answer] = {}
    cell: list[str] | None = None
    rank: int | None = None
    inside = False
    at: float | None = None
    node: str | None = None
    dump: list[str] = []
    why: str | None = None
    for line in text.split("\n"):
        if cell is not None:
            cell.append(line)
            continue
        if line == "@@cell":
            cell = []
            continue
        if line.startswith("@@ "):
            word = line[3:].strip()
            rank = int(word) if word.isdigit() and len(word) < 8 else None
            inside = False
            continue
        if rank is None:
            continue
        if line.startswith("request "):
            words = line.split()
            inside = len(words) >= 2 and words[1] == rid
            at = _float(words[2]) if inside and len(words) > 2 else None
            node = words[3] if inside and len(words) > 3 else None
            dump, why = [], None
            continue
        if not inside:
            continue
        if line.startswith("end "):
            if line.split()[1:2] == [rid]:
                answers[rank] = Answer(at=at, node=node, dump="\n".join(dump), why=why)
            inside = False
            continue
        if line.startswith("none ") and why is None:
            why = line[5:].strip()[:300] or "no reason given"
            continue
        dump.append(line)
    cell_text = None
    if cell is not None:
        cell_text = "\n".join(cell)
    return answers, cell_text


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and abs(value) < 1e12 else None


# --- faulthandler's text ------------------------------------------------------------------------

@dataclass(frozen=True)
class Frame:
    """One frame: the file, line and function as faulthandler printed them; ``cell_line`` when
    it is a line of the user's cell (then ``source`` is that line's text, when known)."""

    file: str
    line: int | None
    func: str
    cell_line: int | None = None
    source: str | None = None


@dataclass(frozen=True)
class RawThread:
    """One thread of a dump, frames innermost first (faulthandler's order)."""

    ident: str
    current: bool
    frames: tuple[Frame, ...]
    cut: bool = False  # faulthandler left frames out ("...")


# Every pattern is anchored and linear: no nested quantifiers.
_THREAD_RE = re.compile(
    r"(Current thread|Thread) (0x[0-9a-fA-F]{1,32})\b[^\n]{0,300}\(most recent call first\):")
_STACK_RE = re.compile(r"Stack \(most recent call first\):")
_FRAME_RE = re.compile(r'  File "([^\n]{0,1100})", line (\d{1,9}|\?\?\?) in ([^\n]{0,600})')


def parse_dump(text: str) -> list[RawThread]:
    """faulthandler's ``dump_traceback(all_threads=True)`` text -> threads in the order printed
    (frames innermost first). Lines it does not know are skipped; never raises."""
    threads: list[RawThread] = []
    ident: str | None = None
    current = False
    frames: list[Frame] = []
    cut = False

    def close() -> None:
        if ident is not None:
            threads.append(RawThread(ident, current, tuple(frames), cut))

    for line in text.split("\n"):
        line = line.rstrip("\r")
        m = _THREAD_RE.match(line)
        if m or _STACK_RE.match(line):
            close()
            ident = m.group(2).lower() if m else "0x0"
            current = bool(m and m.group(1) == "Current thread") or not m
            frames, cut = [], False
            continue
        if ident is None:
            continue
        f = _FRAME_RE.fullmatch(line)
        if f:
            number = int(f.group(2)) if f.group(2).isdigit() else None
            frames.append(Frame(file=f.group(1), line=number, func=f.group(3).strip()))
        elif line.strip() in ("...", "<truncated rest of calls>"):
            cut = True
    close()
    return threads[:1000]


# --- one rank's stacks as the user sees them ---------------------------------------------------

@dataclass(frozen=True)
class ThreadStack:
    """A thread's frames, outermost first (innermost last, as a Python traceback)."""

    main: bool
    frames: tuple[Frame, ...]
    cut: bool = False

    @property
    def key(self) -> tuple[object, ...]:
        return (self.main, self.cut, tuple((f.cell_line, f.file if f.cell_line is None else "",
                                            f.line if f.cell_line is None else 0, f.func)
                                           for f in self.frames))


def _is_runpy(path: str) -> bool:
    return path == "<frozen runpy>" or path.endswith("/runpy.py")


def rank_threads(dump: str, cell_lines: Sequence[str] | None = None) -> tuple[ThreadStack, ...]:
    """A rank's dump -> its threads as shown: the main thread (the one the boot started the cell
    in) first, the others in a stable order; the cell's frames mapped to cell lines, our own
    frames (the boot, runpy, an array task's launcher) left out."""
    raw = parse_dump(dump)
    jobdir: str | None = None
    for t in raw:
        for f in t.frames:
            if f.file.endswith("/" + BOOT_FILE):
                jobdir = f.file[: -len(BOOT_FILE) - 1]
                break
        if jobdir is not None:
            break
    cell_file = launcher = None
    if jobdir is not None:
        in_cell_py = any(f.file == f"{jobdir}/cell.py" for t in raw for f in t.frames)
        cell_file = f"{jobdir}/cell.py" if in_cell_py else f"{jobdir}/main.py"
        launcher = f"{jobdir}/main.py" if in_cell_py else None
    main: list[ThreadStack] = []
    others: list[ThreadStack] = []
    for t in raw:
        frames = list(reversed(t.frames))  # outermost first
        is_main = bool(jobdir) and any(f.file == f"{jobdir}/{BOOT_FILE}" for f in frames)
        # leading frames that are ours: the boot, runpy, the array task's launcher
        while frames and (frames[0].file == f"{jobdir}/{BOOT_FILE}" or _is_runpy(frames[0].file)
                          or (launcher is not None and frames[0].file == launcher)):
            frames.pop(0)
        shown = tuple(_as_cell(f, cell_file, cell_lines) for f in frames)
        stack = ThreadStack(main=is_main, frames=shown, cut=t.cut)
        (main if is_main else others).append(stack)
    others.sort(key=lambda s: repr(s.key))
    return tuple(main[:1] + others + main[1:])


def _as_cell(frame: Frame, cell_file: str | None, cell_lines: Sequence[str] | None) -> Frame:
    if cell_file is None or frame.file != cell_file or frame.line is None:
        return frame
    source = None
    if cell_lines is not None and 1 <= frame.line <= len(cell_lines):
        source = cell_lines[frame.line - 1].strip()[:200] or None
    return Frame(file=frame.file, line=frame.line, func=frame.func,
                 cell_line=frame.line + CELL_LINE_OFFSET, source=source)


# --- the whole job -------------------------------------------------------------------------------

@dataclass(frozen=True)
class StackGroup:
    """Ranks whose stacks are identical, on these nodes, and those stacks."""

    ranks: tuple[int, ...]
    nodes: tuple[str, ...]
    threads: tuple[ThreadStack, ...]


@dataclass(frozen=True)
class Stacks:
    """Every running rank's stacks at one moment, grouped (``str()`` is the text shown)."""

    job_id: str
    groups: tuple[StackGroup, ...] = ()
    #: (rank, node or None, why its stack is not here)
    missing: tuple[tuple[int, str | None, str], ...] = ()
    #: seconds between the first and the last rank's answer (None: fewer than two answered)
    spread_s: float | None = None
    asked: bool = True

    def __str__(self) -> str:
        return render_stacks(self)

    def _repr_pretty_(self, p: object, cycle: bool) -> None:  # IPython shows the text
        p.text(str(self))  # type: ignore[attr-defined]


def why_not_running(state: RankState | None) -> str:
    """One line for a rank that runs no program to take a stack of."""
    if state is None or state.phase is RankPhase.WAITING:
        return "not started"
    if state.phase is RankPhase.EXITED:
        return "exited 0"
    if state.phase is RankPhase.FAILED:
        if state.signal is not None:
            return f"died of signal {state.signal}"
        return f"failed, exit {state.exit_code}"
    if state.phase is RankPhase.STOPPED:
        return f"stopped by signal {state.signal}"
    return "not running"


def build_stacks(job_id: str, world_size: int, ranks: Mapping[int, RankState],
                 answers: Mapping[int, Answer], asked: Iterable[int], cell_text: str | None,
                 waited_s: float) -> Stacks:
    """Group the answers of the ranks ``asked`` (those running when asked); every other rank of
    the job says why it has no stack."""
    asked = sorted(set(asked))
    cell_lines = cell_text.split("\n") if cell_text is not None else None
    by_key: dict[tuple[object, ...], tuple[list[int], list[str], tuple[ThreadStack, ...]]] = {}
    missing: list[tuple[int, str | None, str]] = []
    times: list[float] = []
    for rank in range(max(world_size, max(ranks, default=-1) + 1)):
        state = ranks.get(rank)
        node = state.node if state is not None else None
        if rank not in asked:
            missing.append((rank, node, why_not_running(state)))
            continue
        answer = answers.get(rank)
        if answer is None:
            missing.append((rank, node, f"did not answer within {waited_s:.0f} s (a job started "
                                        "before jupyter-tiers could take stacks, or its node "
                                        "does not see the job directory yet)"))
            continue
        node = answer.node or node
        if answer.why is not None:
            missing.append((rank, node, answer.why))
            continue
        threads = rank_threads(answer.dump, cell_lines)
        if not threads:
            missing.append((rank, node, "its dump held no stack"))
            continue
        if answer.at is not None:
            times.append(answer.at)
        key = tuple(t.key for t in threads)
        entry = by_key.setdefault(key, ([], [], threads))
        entry[0].append(rank)
        if node and node not in entry[1]:
            entry[1].append(node)
    groups = tuple(sorted((StackGroup(tuple(r), tuple(n), t) for r, n, t in by_key.values()),
                          key=lambda g: g.ranks[0]))
    spread = max(times) - min(times) if len(times) > 1 else None
    return Stacks(job_id=job_id, groups=groups, missing=tuple(missing), spread_s=spread,
                  asked=bool(asked))


# --- text ----------------------------------------------------------------------------------------

def rank_ranges(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 4, 5]`` -> ``0-2,4-5``."""
    return compress_indices(sorted(set(ranks)))


_NODE_RE = re.compile(r"([A-Za-z0-9_.-]{0,200}?)([1-9][0-9]{0,8}|0)")


def hostlist(nodes: Iterable[str]) -> str:
    """Node names in Slurm's short form: ``node1 node2 node3 gpu7`` -> ``gpu7,node[1-3]``."""
    by_prefix: dict[str, list[int]] = {}
    plain: list[str] = []
    for name in sorted(set(nodes)):
        m = _NODE_RE.fullmatch(name)
        if m:
            by_prefix.setdefault(m.group(1), []).append(int(m.group(2)))
        else:
            plain.append(name)
    parts = list(plain)
    for prefix, numbers in by_prefix.items():
        if len(numbers) == 1:
            parts.append(f"{prefix}{numbers[0]}")
        else:
            parts.append(f"{prefix}[{rank_ranges(numbers)}]")
    return ",".join(sorted(parts))


def group_title(group: StackGroup) -> str:
    """``ranks 0-2,4-255 (254) on node[1-32]``, or ``rank 3 (node2)``."""
    where = hostlist(group.nodes)
    if len(group.ranks) == 1:
        return f"rank {group.ranks[0]}" + (f" ({where})" if where else "")
    return f"ranks {rank_ranges(group.ranks)} ({len(group.ranks)})" + (f" on {where}" if where else "")


def frame_text(frame: Frame) -> str:
    if frame.cell_line is not None:
        text = f"cell line {frame.cell_line}, in {frame.func}"
        return text + (f":  {frame.source}" if frame.source else "")
    line = "?" if frame.line is None else str(frame.line)
    return f'File "{frame.file}", line {line}, in {frame.func}'


def render_stacks(stacks: Stacks) -> str:
    """The text of :class:`Stacks`: one block per group (title, then each thread's frames,
    innermost last), then one line per rank without a stack."""
    out: list[str] = []
    n = sum(len(g.ranks) for g in stacks.groups)
    if not stacks.asked:
        out.append(f"job {stacks.job_id}: no rank is running, so there is no stack to take")
    else:
        when = (f", taken within {stacks.spread_s:.1f} s of each other"
                if stacks.spread_s is not None else "")
        kinds = len(stacks.groups)
        out.append(f"job {stacks.job_id}: stacks of {n} rank{'s' if n != 1 else ''}, "
                   f"{kinds} different stack{'s' if kinds != 1 else ''}{when}")
    for group in stacks.groups:
        out.append("")
        out.append(group_title(group))
        several = len(group.threads) > 1
        for i, thread in enumerate(group.threads):
            if several:
                out.append("  main thread:" if thread.main else f"  thread {i + 1}:")
            pad = "    " if several else "  "
            if thread.cut:
                out.append(pad + "... (outer frames left out by faulthandler)")
            if not thread.frames:
                out.append(pad + "(no Python frame)")
            out.extend(pad + frame_text(f) for f in thread.frames)
    if stacks.missing:
        out.append("")
        for why, ranks in _by_reason(stacks.missing):
            if len(ranks) == 1:
                rank, node = ranks[0]
                out.append(f"rank {rank}" + (f" ({node})" if node else "") + f": {why}")
            else:
                nodes = hostlist(n for _, n in ranks if n)
                out.append(f"ranks {rank_ranges(r for r, _ in ranks)} ({len(ranks)})"
                           + (f" on {nodes}" if nodes else "") + f": {why}")
    return "\n".join(out) + "\n"


def _by_reason(missing: Sequence[tuple[int, str | None, str]]
               ) -> list[tuple[str, list[tuple[int, str | None]]]]:
    grouped: dict[str, list[tuple[int, str | None]]] = {}
    for rank, node, why in missing:
        grouped.setdefault(why, []).append((rank, node))
    return sorted(grouped.items(), key=lambda item: item[1][0][0])


def stacks_data(stacks: Stacks) -> dict[str, object]:
    """Plain JSON-ready data of :class:`Stacks` for views."""
    return {
        "job_id": stacks.job_id,
        "text": render_stacks(stacks),
        "spread_s": stacks.spread_s,
        "groups": [{"title": group_title(g), "ranks": list(g.ranks), "nodes": list(g.nodes),
                    "threads": [{"main": t.main, "frames": [frame_text(f) for f in t.frames]}
                                for t in g.threads]} for g in stacks.groups],
        "missing": [{"rank": r, "node": n, "why": w} for r, n, w in stacks.missing],
    }
