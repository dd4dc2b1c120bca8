"""One remote command's exchange: feed stdin, collect stdout and stderr, wait for the status."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import BUFSIZE, POLL

if TYPE_CHECKING:
    import paramiko


@dataclass(frozen=True)
class CommandResult:
    """The outcome of :meth:`SSHTransport.run`. ``exit_status`` is -1 if the server sent none
    (e.g. the command was killed by a signal)."""

    argv: tuple[str, ...]
    exit_status: int
    stdout: bytes
    stderr: bytes

    def text(self) -> str:
        """stdout decoded as UTF-8 (undecodable bytes replaced)."""
        return self.stdout.decode("utf-8", errors="replace")


def exchange(
    chan: paramiko.Channel, stdin: bytes, deadline: float | None
) -> tuple[bytes, bytes] | None:
    """Feed ``stdin`` and collect ``(stdout, stderr)`` until EOF; ``None`` past the deadline.

    stdout is read here, stderr and stdin each by a helper thread, all three blocking on
    paramiko's own condition variables (woken as soon as data, window space or EOF arrives;
    the short timeout only lets them notice the deadline). Reading both streams at once keeps
    the channel window open whatever the command writes, and writing stdin alongside avoids
    the classic pipe deadlock. (Not ``select`` on ``chan.fileno()``: paramiko's pipe that
    merges stdout and stderr readiness can lose a wake-up under concurrent traffic.)
    """
    chan.settimeout(POLL)
    stop = threading.Event()
    err: list[bytes] = []

    def read_stderr() -> None:
        while not stop.is_set():
            try:
                data = chan.recv_stderr(BUFSIZE)
            except TimeoutError:
                continue
            except Exception:  # pragma: no cover - channel torn down
                return
            if not data:
                return
            err.append(data)

    def write_stdin() -> None:
        view = memoryview(stdin)
        try:
            while view and not stop.is_set():
                try:
                    sent = chan.send(view[:BUFSIZE].tobytes())
                except TimeoutError:
                    continue
                if sent <= 0:
                    return  # the channel closed: the command no longer reads its stdin
                view = view[sent:]
            chan.shutdown_write()
        except Exception:
            # The command exited before reading all its input: like a broken pipe, that is
            # the command's business and its exit status tells the story.
            return

    helpers = [threading.Thread(target=read_stderr, daemon=True, name="jupyter-tiers-ssh-err")]
    if stdin:
        helpers.append(
            threading.Thread(target=write_stdin, daemon=True, name="jupyter-tiers-ssh-in")
        )
    else:
        chan.shutdown_write()
    for h in helpers:
        h.start()
    out: list[bytes] = []
    try:
        while True:
            if deadline is not None and time.monotonic() >= deadline:
                return None
            try:
                data = chan.recv(BUFSIZE)
            except TimeoutError:
                continue
            if not data:
                break
            out.append(data)
        # stdout and stderr reach EOF together: the stderr reader ends once it has drained.
        helpers[0].join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if helpers[0].is_alive():
            return None
        return b"".join(out), b"".join(err)
    finally:
        stop.set()


def wait_status(chan: paramiko.Channel, deadline: float | None) -> bool:
    if deadline is None:
        chan.status_event.wait()
        return True
    return bool(chan.status_event.wait(max(0.0, deadline - time.monotonic())))
