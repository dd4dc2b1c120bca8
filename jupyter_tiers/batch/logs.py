"""Log streams and the rank-prefixed log format of the job-directory protocol (pure).

Each tier hands the watcher a decoder for its own log format: rank-prefixed job logs here
(:class:`LogDecoder`); Kubernetes pod logs, which carry no rank prefix, in ``k8s/``.

A fast log brings hundreds of thousands of lines a second, and building one Python object per
line is what used to cost the most. So the decoder hands out :class:`LogBatch` values: the bytes
of whole lines plus their count and end offset, found with a few C-level calls per chunk. A
batch decodes its text in one call when something shows it, and builds per-line
:class:`~jupyter_tiers.core.model.LogLine` objects only when something iterates it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Protocol, overload

from ..core.model import LogLine

_RANK_LINE_RE = re.compile(r"^(\d{1,7}): ?(.*)$", re.DOTALL)


class ByteStream(Protocol):
    """A live byte stream (a followed log): iterate for chunks, close to stop."""

    def __iter__(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


def split_log_line(line: str) -> tuple[int | None, str]:
    """A merged-log line -> (rank or None, text without the ``"R: "`` prefix)."""
    match = _RANK_LINE_RE.match(line)
    if match:
        return int(match.group(1)), match.group(2)
    return None, line


def _decode_lines(data: bytes, end: int) -> list[LogLine]:
    """Every line of ``data`` (whole lines; the last may lack its newline) as LogLines."""
    # One decode and split for the whole block. Same text as decoding line by line: a newline
    # byte is never part of a UTF-8 sequence, valid or not. Offsets count bytes, which in ASCII
    # are the characters.
    texts = data.decode("utf-8", errors="replace").split("\n")
    if data.isascii():
        sizes = [len(t) + 1 for t in texts]
    else:
        sizes = [len(raw) + 1 for raw in data.split(b"\n")]
    if data.endswith(b"\n"):
        texts.pop()
        sizes.pop()
    else:
        sizes[-1] -= 1  # a final line without its newline (LogDecoder.flush)
    offset = end - len(data)
    lines: list[LogLine] = []
    append = lines.append
    match = _RANK_LINE_RE.match
    for text, size in zip(texts, sizes, strict=True):
        offset += size
        if text[-1:] == "\r":
            text = text.rstrip("\r")
        # Fast path for the shim's "R: " prefix (half the cost of the regex), which still
        # decides every other shape so the result equals split_log_line's.
        head, sep, rest = text.partition(": ")
        if sep and len(head) <= 7 and head.isdecimal():
            append(LogLine(rest, int(head), offset))
            continue
        m = match(text)
        # LogLine(text, rank, end_offset), positionally: keywords cost ~10% of this loop.
        if m:
            append(LogLine(m.group(2), int(m.group(1)), offset))
        else:
            append(LogLine(text, None, offset))
    return lines


class LogBatch(Sequence[LogLine]):
    """Consecutive whole lines of a merged log, kept as the log's own bytes.

    ``data`` ends with a newline, except for a batch from :meth:`LogDecoder.flush` (a last line
    that never got one); ``end`` is the byte offset in the log just past ``data``. Iterating or
    indexing gives :class:`LogLine` values (built once, on first use); :attr:`text` is the lines
    decoded in one call, rank prefixes and all, which is what a view shows. Compares equal to a
    list of the same LogLines.
    """

    __slots__ = ("_lines", "_n", "_text", "data", "end")

    def __init__(self, data: bytes = b"", end: int = 0, count: int | None = None) -> None:
        self.data = data
        self.end = end
        if count is None:
            count = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        self._n = count
        self._lines: list[LogLine] | None = None
        self._text: str | None = None

    @property
    def start(self) -> int:
        """Byte offset of the first line in the log."""
        return self.end - len(self.data)

    @property
    def text(self) -> str:
        """The lines as one string (rank prefixes kept, ``\\r`` kept, invalid UTF-8 replaced)."""
        if self._text is None:
            self._text = self.data.decode("utf-8", errors="replace")
        return self._text

    def lines(self) -> list[LogLine]:
        """The lines as LogLines (rank split off, trailing ``\\r`` dropped, end offsets)."""
        if self._lines is None:
            self._lines = _decode_lines(self.data, self.end) if self._n else []
        return self._lines

    def tail(self, n: int) -> LogBatch:
        """The last ``n`` lines (all of them if there are fewer), still as bytes."""
        if n >= self._n:
            return self
        if n <= 0:
            return LogBatch(b"", self.end, 0)
        data = self.data
        # Walk back over n line ends (the last line's own newline does not start a line).
        pos = len(data) - 1 if data.endswith(b"\n") else len(data)
        for _ in range(n):
            pos = data.rfind(b"\n", 0, pos)
        return LogBatch(data[pos + 1:], self.end, n)

    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def __iter__(self) -> Iterator[LogLine]:
        return iter(self.lines())

    @overload
    def __getitem__(self, index: int) -> LogLine: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[LogLine]: ...

    def __getitem__(self, index: int | slice) -> LogLine | Sequence[LogLine]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._n)
            if stop == self._n and step == 1:  # a tail stays a batch (the batcher's trim)
                return self.tail(max(0, self._n - start))
            return self.lines()[index]
        return self.lines()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LogBatch):
            return self.data == other.data and self.end == other.end
        if isinstance(other, (list, tuple)):
            return self.lines() == list(other)
        return NotImplemented

    # Unhashable, like the list it compares equal to (typeshed declares __hash__ a method).
    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Sequence[LogLine]) -> list[LogLine]:
        return [*self.lines(), *other]

    def __radd__(self, other: Sequence[LogLine]) -> list[LogLine]:
        return [*other, *self.lines()]

    def __repr__(self) -> str:
        return f"LogBatch({self._n} lines, bytes {self.start}..{self.end})"


class LogDecoder:
    """Turns a byte stream of the merged log into :class:`LogBatch` values, tracking the exact
    byte offset.

    Bytes after the last newline are held until their line is complete, so resuming the stream at
    :attr:`offset` after a dropped connection neither loses nor repeats a line. The held bytes are
    kept as a list of chunks and joined once, when their line ends, so a single line of many
    megabytes costs linear time, not quadratic.
    """

    def __init__(self, offset: int = 0, *, skip_partial: bool = False) -> None:
        self.offset = offset  # bytes consumed into complete lines
        self._pending: list[bytes] = []
        self._pending_size = 0
        # Starting mid-file (to show only a log's tail): drop the rest of the line we landed in.
        self._skipping = skip_partial and offset > 0

    @property
    def received(self) -> int:
        """Bytes received so far, including an incomplete last line."""
        return self.offset + self._pending_size

    def feed(self, chunk: bytes) -> LogBatch:
        """The lines that ``chunk`` completes (an empty batch if none)."""
        if self._skipping:
            cut = chunk.find(b"\n") + 1
            if not cut:
                self.offset += len(chunk)
                return LogBatch(b"", self.offset, 0)
            self.offset += cut
            chunk = chunk[cut:]
            self._skipping = False
        cut = chunk.rfind(b"\n") + 1
        if not cut:
            if chunk:
                self._pending.append(chunk)
                self._pending_size += len(chunk)
            return LogBatch(b"", self.offset, 0)
        count = chunk.count(b"\n", 0, cut)
        if self._pending:
            self._pending.append(chunk[:cut])
            block = b"".join(self._pending)
            self._pending.clear()
        else:
            block = chunk[:cut] if cut < len(chunk) else chunk
        rest = chunk[cut:]
        if rest:
            self._pending.append(rest)
        self._pending_size = len(rest)
        self.offset += len(block)
        return LogBatch(block, self.offset, count)

    def flush(self) -> LogBatch:
        """Emit a final line that has no newline (call only when the log is complete)."""
        if not self._pending:
            return LogBatch(b"", self.offset, 0)
        raw = b"".join(self._pending)
        self._pending.clear()
        self._pending_size = 0
        self.offset += len(raw)
        return LogBatch(raw, self.offset, 1)


def batch_text(lines: Sequence[LogLine]) -> tuple[str, int | None]:
    """A follower's batch as raw merged-log text (``R: `` prefixes kept, ending with a newline)
    and the log offset just past it (None for an empty batch of LogLines)."""
    if isinstance(lines, LogBatch):
        text = lines.text
        return (text if not text or text.endswith("\n") else text + "\n"), lines.end
    text = "".join(f"{ln.rank}: {ln.text}\n" if ln.rank is not None else f"{ln.text}\n" for ln in lines)
    return text, (lines[-1].end_offset if lines else None)
