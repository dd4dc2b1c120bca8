"""Reading a local job's directory: plain file reads, no process started (LocalTier's status,
usage and log views use them).

The rank files with each rank's latest usage sample and the nodes' GPU snapshots joined in, the
usage series for ``job.usage()``, the newest checkpoint entry, the last lines of a file read from
its end. A file or directory that cannot be read reads as empty: a job still starting, or one
whose directory was removed, is shown with what is there.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import BinaryIO

from ..batch.arrays import CELL_FILE
from ..batch.jobdir import RANKS_DIR, newest_entry, parse_rank_file
from ..batch.stacks import MAX_ANSWER_BYTES, REQUEST_FILE, STACKS_DIR, check_request_id
from ..batch.usage import GPU_DIR, USAGE_DIR, USAGE_SUFFIX, UsageSeries, join_gpus, parse_usage_dump
from ..core.model import RankState


def read_ranks(jobdir: Path) -> dict[int, RankState]:
    """Every rank's state from ``ranks/<rank>`` (heartbeat: the file's mtime), with its latest
    usage sample (``ranks/<rank>.u``) and the GPU use of the node snapshots under ``.gpu/``."""
    ranks: dict[int, RankState] = {}
    rdir = jobdir / RANKS_DIR
    for name in _listdir(rdir):
        if not name.isdigit():
            continue
        try:
            path = rdir / name
            mtime = path.stat().st_mtime
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        usage = _read_text(rdir / (name + USAGE_SUFFIX))
        ranks[int(name)] = parse_rank_file(int(name), text, heartbeat_at=mtime, usage_text=usage)
    gdir = jobdir / GPU_DIR
    gpus = {n: _read_text(gdir / n) for n in _listdir(gdir) if not n.startswith(".")}
    return join_gpus(ranks, gpus) if gpus else ranks


def read_usage_series(jobdir: Path, max_samples: int) -> UsageSeries:
    """The job's ``usage/`` files (each file's last ``max_samples`` lines) and its ranks' nodes,
    as the dump the Slurm tier reads in one command (batch/usage.parse_usage_dump)."""
    lines = max(1, int(max_samples))
    parts: list[str] = []
    for name in sorted(_listdir(jobdir / USAGE_DIR)):
        try:
            with open(jobdir / USAGE_DIR / name, "rb") as f:
                text = read_last_lines(f, lines).decode("utf-8", errors="replace")
        except OSError:
            text = ""
        parts.append(f"@@ {name}\n{text}")
    for name in _listdir(jobdir / RANKS_DIR):
        if name.isdigit():
            node = parse_rank_file(int(name), _read_text(jobdir / RANKS_DIR / name)).node
            if node:
                parts.append(f"@node {name} {node}\n")
    return parse_usage_dump("".join(p if p.endswith("\n") else p + "\n" for p in parts))


def newest_checkpoint(directory: str) -> str | None:
    """The newest entry of a checkpoint directory (batch/jobdir.newest_entry; never a symlink),
    or None when there is none or the directory cannot be read."""
    try:
        with os.scandir(directory) as it:
            entries = []
            for entry in it:
                try:
                    kind = "l" if entry.is_symlink() else "d" if entry.is_dir() else "f"
                    entries.append((entry.stat(follow_symlinks=False).st_mtime, kind, entry.name))
                except OSError:
                    continue
    except OSError:
        return None
    return newest_entry(entries)


def read_last_lines(f: BinaryIO, lines: int, block: int = 1 << 16) -> bytes:
    """The last ``lines`` lines of a seekable binary file, as ``tail -n`` counts them (a line ends
    at ``\n``; a last line without one counts), reading ``block`` bytes at a time from the end."""
    pos = f.seek(0, os.SEEK_END)
    blocks: list[bytes] = []
    newlines = 0
    while pos > 0 and newlines <= lines:  # one more newline than lines: where the first starts
        step = min(block, pos)
        pos -= step
        f.seek(pos)
        data = f.read(step)
        blocks.append(data)
        newlines += data.count(b"\n")
    data = b"".join(reversed(blocks))
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    for _ in range(lines):
        end = data.rfind(b"\n", 0, end)
        if end < 0:
            return data
    return data[end + 1:]


def tail_text(path: Path, limit: int = 800) -> str:
    """The last ``limit`` characters of a text file, stripped; "" when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    return text[-limit:]


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def write_stacks_request(jobdir: Path, rid: str) -> None:
    """Ask every rank for its stacks: ``stacks/request`` replaced atomically (batch/stacks.py)."""
    folder = jobdir / STACKS_DIR
    folder.mkdir(mode=0o700, exist_ok=True)
    tmp = folder / f".{REQUEST_FILE}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # a stale one, or a planted symlink: removed, never written through
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    with os.fdopen(os.open(tmp, flags, 0o600), "w", encoding="utf-8") as f:
        f.write(check_request_id(rid) + "\n")
    os.replace(tmp, folder / REQUEST_FILE)


def read_stacks_text(jobdir: Path) -> str:
    """The ranks' answers (the last MAX_ANSWER_BYTES of each ``stacks/<rank>``) and the cell's
    file, as :func:`~jupyter_tiers.batch.stacks.parse_answers` reads them."""
    parts: list[str] = []
    folder = jobdir / STACKS_DIR
    for name in sorted(n for n in _listdir(folder) if n.isdigit()):
        with contextlib.suppress(OSError), open(folder / name, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - MAX_ANSWER_BYTES))
            parts.append(f"@@ {name}\n{f.read(MAX_ANSWER_BYTES).decode('utf-8', 'replace')}\n")
    cell = jobdir / CELL_FILE if (jobdir / CELL_FILE).exists() else jobdir / "main.py"
    with contextlib.suppress(OSError), open(cell, "rb") as f:
        parts.append("@@cell\n" + f.read(MAX_ANSWER_BYTES).decode("utf-8", "replace"))
    return "".join(parts)
