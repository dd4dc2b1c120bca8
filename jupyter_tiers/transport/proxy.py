"""A ProxyCommand as a socket-like object for paramiko."""

from __future__ import annotations

import collections
import contextlib
import os
import select
import subprocess
import threading


class ProxyCommandSocket:
    """A socket-like pipe to a ProxyCommand, run like ssh does (``$SHELL -c "exec CMD"``).

    Unlike ``paramiko.ProxyCommand`` it reports the command's exit as EOF (so a dead proxy is
    a dead connection, not a silent hang), runs the command through the shell (pipes and
    redirections work), and keeps the last lines of its stderr for error messages.
    """

    def __init__(self, command: str) -> None:
        shell = os.environ.get("SHELL") or "/bin/sh"
        self.process = subprocess.Popen(
            [shell, "-c", f"exec {command}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
        )
        self.timeout: float | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=5)
        threading.Thread(target=self._read_stderr, daemon=True, name="jupyter-tiers-proxy").start()

    def _read_stderr(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", errors="replace").strip()
            if line:
                self._stderr.append(line[:200])

    def last_words(self) -> str:
        """The last thing the command wrote to stderr (for error messages)."""
        return self._stderr[-1] if self._stderr else ""

    def send(self, data: bytes) -> int:
        assert self.process.stdin is not None
        return self.process.stdin.write(data) or 0  # OSError (EPIPE) -> paramiko: closed

    def recv(self, size: int) -> bytes:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], self.timeout)
        if not ready:
            raise TimeoutError()
        return os.read(fd, size)  # b"" once the command exits: paramiko sees EOF

    def settimeout(self, timeout: float | None) -> None:
        self.timeout = timeout

    @property
    def closed(self) -> bool:
        return self.process.poll() is not None

    _closed = closed

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                self.process.kill()
                self.process.wait(5)
        # stdout stays open: paramiko's reader thread may still be select()ing on it, and a
        # closed (then reused) descriptor would be worse than the few bytes kept until GC.
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
