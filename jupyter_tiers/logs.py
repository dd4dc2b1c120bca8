"""Log streams and the rank-prefixed log format of the job-directory protocol (pure).

Each tier hands the watcher a decoder for its own log format: rank-prefixed job logs here
(:class:`LogDecoder`); Kubernetes pod logs, which carry no rank prefix, in ``k8s/``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Protocol

from .model import LogLine

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


class LogDecoder:
    """Turns a byte stream of the merged log into LogLines, tracking the exact byte offset.

    Bytes after the last newline are held until their line is complete, so resuming the stream at
    :attr:`offset` after a dropped connection neither loses nor repeats a line.
    """

    def __init__(self, offset: int = 0, *, skip_partial: bool = False) -> None:
        self.offset = offset  # bytes consumed into complete lines
        self._pending = b""
        # Starting mid-file (to show only a log's tail): drop the rest of the line we landed in.
        self._skipping = skip_partial and offset > 0

    @property
    def received(self) -> int:
        """Bytes received so far, including an incomplete last line."""
        return self.offset + len(self._pending)

    def feed(self, chunk: bytes) -> list[LogLine]:
        if self._skipping:
            cut = chunk.find(b"\n") + 1
            if not cut:
                self.offset += len(chunk)
                return []
            self.offset += cut
            chunk = chunk[cut:]
            self._skipping = False
        data = self._pending + chunk if self._pending else chunk
        cut = data.rfind(b"\n") + 1
        if not cut:
            self._pending = data
            return []
        self._pending = data[cut:]
        block = data[:cut] if cut < len(data) else data
        # One decode and split for the whole block (a fast log brings thousands of lines per
        # chunk). Same text as decoding line by line: a newline byte is never part of a UTF-8
        # sequence, valid or not. Offsets count bytes, which in ASCII are the characters.
        texts = block.decode("utf-8", errors="replace").split("\n")
        texts.pop()
        if block.isascii():
            sizes = [len(t) + 1 for t in texts]
        else:
            raws = block.split(b"\n")
            raws.pop()
            sizes = [len(raw) + 1 for raw in raws]
        offset = self.offset
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
        self.offset = offset
        return lines

    def flush(self) -> list[LogLine]:
        """Emit a final line that has no newline (call only when the log is complete)."""
        if not self._pending:
            return []
        raw, self._pending = self._pending, b""
        self.offset += len(raw)
        rank, text = split_log_line(raw.decode("utf-8", errors="replace").rstrip("\r"))
        return [LogLine(text=text, rank=rank, end_offset=self.offset)]
