"""Watching local services: one poller thread per tier reads every watched service's files (a
status when it changes, new log lines as they come), and the pure readers of the log file
(line parsing, bounded tails, restart marks)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from ..batch.requeue import marker_restart
from ..config.registry import JobRecord
from ..core.model import PodLogLine, ServiceStatus
from ..engine.subscription import Subscription
from . import serve_supervisor as ssv

MAX_LOG_REPLAY = 1 << 20  # a new watcher gets at most the last MiB of the log


class ServiceListener(Subscription[ServiceStatus]):
    """One listener on one service: where its log reading stands, and the state it recorded."""

    def __init__(self, poller: ServicePoller, record: JobRecord,
                 on_status: Callable[[ServiceStatus], None] | None,
                 on_lines: Callable[[list[PodLogLine]], None] | None, offset: int) -> None:
        super().__init__(record, on_status)
        self.poller = poller
        self.on_lines = on_lines
        self.offset = offset
        self.partial = b""
        self.skip_first = False
        self.started_mid_file = False
        self.inode: int | None = None  # of the log file the offset is in
        # Each replica's container restart, from the log's restart markers (0 when reading from
        # the log's start; None: not known yet, reading began mid-file).
        self.restarts: dict[str, int | None] = {}
        self.last: ServiceStatus | None = None
        self.recorded = ""

    def _detach(self) -> None:
        self.poller.remove(self)


class ServicePoller:
    """One thread per tier reading every watched service's files: a status delivered when it
    changes, new log lines as they come. Callbacks run on this thread, in order."""

    def __init__(self, name: str, status_now: Callable[[JobRecord], ServiceStatus],
                 record_state: Callable[[JobRecord, ServiceStatus], None], interval: float) -> None:
        self.status_now = status_now  # the tier's read of a service's files
        self.record_state = record_state  # the tier's registry update
        self.interval = interval
        self._subs: list[ServiceListener] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"jt-local-serve-{name}", daemon=True)
        self._thread.start()

    def add(self, record: JobRecord, on_status: Callable[[ServiceStatus], None] | None,
            on_lines: Callable[[list[PodLogLine]], None] | None) -> ServiceListener:
        size, inode = 0, None
        with contextlib.suppress(OSError):
            info = (Path(record.jobdir) / ssv.LOG_FILE).stat()
            size, inode = info.st_size, info.st_ino
        sub = ServiceListener(self, record, on_status, on_lines, max(0, size - MAX_LOG_REPLAY))
        sub.skip_first = sub.offset > 0
        sub.started_mid_file = sub.offset > 0
        sub.inode = inode
        with self._lock:
            self._subs.append(sub)
        return sub

    def remove(self, sub: ServiceListener) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._subs.remove(sub)

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                subs = list(self._subs)
            for sub in subs:
                with contextlib.suppress(Exception):  # one broken service must not stop the others
                    self._poll(sub)
            self._stop.wait(self.interval)

    def _poll(self, sub: ServiceListener) -> None:
        if sub.on_lines is not None:
            self._lines(sub)
        status = self.status_now(sub.record)
        if status == sub.last:
            return
        sub.last = status
        if status.state.value != sub.recorded:
            sub.recorded = status.state.value
            self.record_state(sub.record, status)
        sub.deliver(status)
        if status.state.terminal:
            self.remove(sub)
            sub.end(status)

    def _lines(self, sub: ServiceListener) -> None:
        assert sub.on_lines is not None
        svcdir = Path(sub.record.jobdir)
        try:
            f = open(svcdir / ssv.LOG_FILE, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            return
        with f:
            inode = os.fstat(f.fileno()).st_ino
            data = b""
            if sub.inode is not None and inode != sub.inode:
                # Rotated: the rest of the file we were reading is now service.log.1.
                with contextlib.suppress(OSError), open(svcdir / ssv.ROTATED_LOG, "rb") as old:
                    if os.fstat(old.fileno()).st_ino == sub.inode:
                        old.seek(sub.offset)
                        data = old.read()
                sub.offset = 0
            sub.inode = inode
            f.seek(sub.offset)
            fresh = f.read(1 << 20)
        sub.offset += len(fresh)
        data = sub.partial + data + fresh
        end = data.rfind(b"\n") + 1
        sub.partial = data[end:]
        raw_lines = data[:end].splitlines()
        if sub.skip_first and raw_lines:
            sub.skip_first = False  # started mid-file: the first line is a part
            raw_lines = raw_lines[1:]
        out = tag_restarts([parse_log_line(raw) for raw in raw_lines], sub.restarts,
                           None if sub.started_mid_file else 0)
        if out:
            sub.on_lines(out)


def parse_log_line(raw: bytes) -> PodLogLine:
    """One line of ``service.log`` (``<replica>: <text>``) as a PodLogLine (pure)."""
    text = raw.decode("utf-8", errors="replace")
    pod, sep, rest = text.partition(": ")
    return PodLogLine(text=rest, pod=pod) if sep else PodLogLine(text=text, pod="")


def text_tail(path: Path, limit: int = 800) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()[-limit:]
    except OSError:
        return ""




def tail_bytes(paths: Sequence[Path], limit: int) -> tuple[bytes, bool]:
    """The last ``limit`` bytes of ``paths`` read one after the other (a missing one is empty),
    from the first line that starts in them, and whether earlier bytes were left out."""
    sizes = []
    for path in paths:
        try:
            sizes.append(path.stat().st_size)
        except FileNotFoundError:
            sizes.append(0)
    skip = max(0, sum(sizes) - limit)
    cut = skip > 0
    parts = []
    for path, size in zip(paths, sizes, strict=True):
        if skip >= size:
            skip -= size
            continue
        with contextlib.suppress(FileNotFoundError), open(path, "rb") as f:
            f.seek(skip)
            parts.append(f.read(size - skip))  # bounded: a file that grew meanwhile is read to here
        skip = 0
    data = b"".join(parts)
    if cut:
        data = data[data.find(b"\n") + 1:] if b"\n" in data else b""
    return data, cut


def tag_restarts(lines: list[PodLogLine], restarts: dict[str, int | None],
                 first: int | None) -> list[PodLogLine]:
    """Each line with its replica's restart (pure but for ``restarts``, the state kept between
    calls): a ``— restart N —`` marker line sets it; a replica not seen yet starts at ``first``
    (0 when the log is read from its start, None when reading began mid-file)."""
    out = []
    for line in lines:
        marked = marker_restart(line.text)
        if marked is not None:
            restarts[line.pod] = marked
        elif line.pod not in restarts:
            restarts[line.pod] = first
        out.append(line._replace(restart=restarts[line.pod]))
    return out
