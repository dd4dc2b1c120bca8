"""RemoteStream: the output of a long-running remote command as an iterator of chunks."""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

from .closing import ChunkStream
from .errors import BUFSIZE, POLL, ConnectError, reason, short_argv

if TYPE_CHECKING:
    import paramiko

    from .connection import Connection

_STDERR_KEEP = 65536  # bytes of a stream's stderr kept for diagnostics


class RemoteStream(ChunkStream):
    """Output of a long-running remote command, as an iterator of ``bytes`` chunks.

    Chunks are delivered as they arrive (no line buffering). Iteration ends at EOF, after which
    :attr:`exit_status` is set; it raises :class:`ConnectError` if the connection drops first,
    and :class:`CommandTimeout` if ``timeout`` seconds pass without a chunk (the stream stays
    usable: iterate again to keep waiting). :meth:`close` (from any thread) closes the channel
    and makes iteration end quietly; the remote command gets no signal, only a closed pipe.
    The command's stderr is drained continuously; its last 64 KiB are kept in :attr:`stderr`.
    """

    def __init__(
        self,
        channel: paramiko.Channel,
        connection: Connection,
        argv: tuple[str, ...],
        timeout: float | None,
    ) -> None:
        self.argv = argv
        self.timeout = timeout
        self._chan = channel
        self._conn = connection
        self._closed = False
        self._done = False
        self._exit_status: int | None = None
        self._stderr = bytearray()

    @property
    def stderr(self) -> bytes:
        """The tail (at most 64 KiB) of what the command wrote to stderr so far."""
        self._drain_stderr()
        return bytes(self._stderr)

    def read(self, timeout: float | None = None) -> bytes | None:
        """The next chunk; ``b""`` at the end of the stream; ``None`` if ``timeout`` passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        chan = self._chan
        while True:
            if self._closed or self._done:
                return b""
            self._drain_stderr()
            wait = POLL
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                wait = min(wait, left)
            chan.settimeout(wait)
            try:
                data = chan.recv(BUFSIZE)
            except TimeoutError:
                continue
            except (OSError, EOFError) as e:
                # paramiko reports a closed channel as b""; but recv() also sends the window
                # adjustment, and on a connection the network dropped that raises EOFError.
                if self._closed:
                    return b""
                raise ConnectError(f"stream `{short_argv(self.argv)}` failed: {reason(e)}") from None
            if data:
                return data
            if self._closed:
                return b""
            self._finish()
            return b""

    def _drain_stderr(self) -> None:
        chan = self._chan
        try:
            while chan.recv_stderr_ready():
                self._stderr += chan.recv_stderr(BUFSIZE)
        except OSError:  # pragma: no cover
            return
        if len(self._stderr) > _STDERR_KEEP:
            del self._stderr[: len(self._stderr) - _STDERR_KEEP]

    def _finish(self) -> None:
        chan = self._chan
        while not chan.status_event.wait(POLL):
            if self._closed:
                return
        self._drain_stderr()
        if chan.exit_status == -1 and self._conn.dropped():
            self._done = True
            chan.close()
            raise ConnectError(
                f"connection lost while following `{short_argv(self.argv)}`"
            )
        self._exit_status = chan.exit_status
        self._done = True
        chan.close()

    def close(self) -> None:
        """Stop following: close the channel (safe to call from another thread, twice)."""
        self._closed = True
        with contextlib.suppress(Exception):
            self._chan.close()
