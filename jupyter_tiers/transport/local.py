"""Local transport: the Slurm tier's commands as subprocesses of this machine, for Jupyter running
on the cluster itself (a login node, or a compute node through Open OnDemand or batchspawner).

It runs the same argv lists as :class:`~.ssh.SSHTransport` (the tier's bash programs take their
data as "$1"..., never pasted), each in its own session, from the home directory (where an SSH
command starts), with the environment :func:`jupyter_tiers.batch.jobenv.clean_env` makes: none of the
enclosing job's variables reach sbatch, squeue or the job. Errors are the SSH transport's:
:class:`CommandTimeout`, :class:`CommandError`, and :class:`ConnectError` (not transient) when
this machine has no ``sbatch``.

Typical use::

    t = LocalTransport()
    t.run(["squeue", "--me"]).text()
    with t.stream(["tail", "-F", "log.txt"]) as s:
        for chunk in s: ...
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import selectors
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from ..batch.jobenv import clean_env
from .closing import ChunkStream, ClosedOnExit
from .errors import (
    BUFSIZE,
    POLL,
    CommandError,
    CommandTimeout,
    ConnectError,
    TransportError,
    checked_argv,
    short_argv,
)
from .exchange import CommandResult

_STDERR_KEEP = 65536  # bytes of a stream's stderr kept for diagnostics
# A followed log is read from a pipe grown to 1 MiB, and what the command has written by then is
# handed over as one piece of up to 256 KiB: tail writes 8-16 KiB at a time, and a 200 MB catch-up
# read piece by piece cost the reader 14,000 wake-ups (bench/local_slurm.py). Larger pieces were
# slower: each read's buffer of that size is a fresh mapping.
_STREAM_PIPE = 1 << 20
_PIECE = 256 << 10
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
NO_SBATCH = ("this machine has no sbatch on PATH: a slurm profile without host runs Slurm's "
             "commands here (Jupyter on the cluster); elsewhere give it host: LOGIN_NODE to reach "
             "one over SSH")


def _end_session(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL every process of ``proc``'s session while its leader is unreaped (its pid, and so
    the session's id, cannot belong to anyone else yet)."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


def _status(code: int) -> int:
    return code if code >= 0 else -1  # killed by a signal: no status, as over SSH


class LocalTransport(ClosedOnExit):
    """Slurm's commands on this machine; thread-safe, nothing to connect.

    ``environ``: the environment to clean (default: this process's, read at each command so a
    changed ``SLURM_CONF`` applies). No profile's ``env`` reaches these commands.
    """

    def __init__(self, *, label: str | None = None, environ: Mapping[str, str] | None = None) -> None:
        self.label = label
        self.code_prompts = 0
        self.connections = 0
        self._environ = environ
        self._checked = False
        self._lock = threading.Lock()
        self._streams: set[LocalStream] = set()
        self.target = f"this machine ({socket.gethostname()}, no SSH)"

    def __repr__(self) -> str:
        return f"<LocalTransport {self.target}>"

    def env(self) -> dict[str, str]:
        """The environment every command gets (a new dict each time)."""
        return clean_env(os.environ if self._environ is None else self._environ)

    @property
    def connected(self) -> bool:
        """Whether :meth:`connect` found sbatch here (nothing stays open)."""
        return self._checked

    def connect(self) -> None:
        """Check once that this machine has ``sbatch`` (:class:`ConnectError` if not)."""
        if self._checked:
            return
        if shutil.which("sbatch", path=self.env().get("PATH", os.defpath)) is None:
            raise ConnectError(NO_SBATCH, transient=False, at_connect=True)
        with self._lock:
            if not self._checked:
                self._checked = True
                self.connections += 1

    def close(self) -> None:
        """End every open stream's command (a later call works as before)."""
        with self._lock:
            streams, self._streams = list(self._streams), set()
        for stream in streams:
            stream.close()

    def home(self) -> str:
        """The directory commands start in, as an SSH command starts in the login's home."""
        return self.env().get("HOME") or os.path.expanduser("~")

    def _popen(self, args: tuple[str, ...], cwd: str | None = None,
               umask: int = -1) -> subprocess.Popen[bytes] | None:
        self.connect()
        env = self.env()
        if cwd is None:
            home = env.get("HOME") or os.path.expanduser("~")
            cwd = home if os.path.isdir(home) else None
        try:
            return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env, start_new_session=True,
                                    cwd=cwd, umask=umask)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise TransportError(f"cannot run `{short_argv(args)}` here: {e.strerror or e}") from None

    def run(self, argv: Sequence[str], *, stdin: bytes | None = None,
            timeout: float | None = 60.0, check: bool = True, cwd: str | None = None,
            umask: int = -1) -> CommandResult:
        """Run ``argv`` here and collect it; the same contract as :meth:`SSHTransport.run`: a
        missing program exits 127 as a shell's would, ``timeout`` ends the command's whole
        session and raises :class:`CommandTimeout`, ``check`` raises :class:`CommandError`.
        Local only: ``cwd`` (default: the home directory) and ``umask`` (default: this
        process's) of the command."""
        args = checked_argv(argv)
        proc = self._popen(args, cwd, umask)
        if proc is None:
            result = CommandResult(args, 127, b"", f"{args[0]}: command not found\n".encode())
        else:
            try:
                out, err = proc.communicate(stdin or b"", timeout=timeout)
            except subprocess.TimeoutExpired:
                _end_session(proc)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.communicate(timeout=5)
                raise CommandTimeout(f"`{short_argv(args)}` did not finish within {timeout:g}s",
                                     args, float(timeout or 0)) from None
            result = CommandResult(args, _status(proc.returncode), out, err)
        if check and result.exit_status != 0:
            last = result.stderr.decode("utf-8", errors="replace").strip().splitlines()
            detail = f": {last[-1][:200]}" if last else ""
            raise CommandError(f"`{short_argv(args)}` exited with status {result.exit_status}{detail}",
                               result)
        return result

    def stream(self, argv: Sequence[str], *, timeout: float | None = None,
               stdin: bytes | None = None) -> LocalStream:
        """Start a long-running command; its output as a :class:`LocalStream` (``timeout``: how
        long iteration waits for the next chunk). Closing the stream ends the command's session."""
        args = checked_argv(argv)
        proc = self._popen(args)
        if proc is None:
            raise TransportError(f"cannot run `{short_argv(args)}` here: {args[0]}: command not found")
        stream = LocalStream(proc, args, timeout, stdin or b"", self._forget)
        with self._lock:
            self._streams.add(stream)
        return stream

    def _forget(self, stream: LocalStream) -> None:
        with self._lock:
            self._streams.discard(stream)


class LocalStream(ChunkStream):
    """The output of a local command as ``bytes`` chunks, as :class:`~.stream.RemoteStream`
    gives a remote one: iteration ends at EOF (then :attr:`exit_status` is set); a wait of
    ``timeout`` seconds without a chunk raises :class:`CommandTimeout` (iterate again to keep
    waiting); :meth:`close` (from any thread) ends the command's session and iteration quietly;
    the last 64 KiB of stderr are in :attr:`stderr`."""

    def __init__(self, proc: subprocess.Popen[bytes], argv: tuple[str, ...], timeout: float | None,
                 stdin: bytes, forget: Callable[[LocalStream], None]) -> None:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self.argv = argv
        self.timeout = timeout
        self._proc = proc
        self._forget = forget
        self._closed = False
        self._done = False
        self._exit_status: int | None = None
        self._stderr = bytearray()
        self._reading = threading.Lock()
        with contextlib.suppress(OSError):  # over the per-user pipe limit: the default size
            fcntl.fcntl(proc.stdout.fileno(), _F_SETPIPE_SZ, _STREAM_PIPE)
        os.set_blocking(proc.stdout.fileno(), False)  # _drain reads what is there, never waits
        self._selector = selectors.DefaultSelector()
        self._selector.register(proc.stdout, selectors.EVENT_READ)
        self._selector.register(proc.stderr, selectors.EVENT_READ)
        if stdin:  # a writer thread: the command may write before it has read all of it
            threading.Thread(target=self._feed, args=(stdin,), daemon=True,
                             name="jupyter-tiers-local-in").start()
        else:
            proc.stdin.close()

    def _feed(self, data: bytes) -> None:
        pipe = self._proc.stdin
        assert pipe is not None
        with contextlib.suppress(OSError):  # the command stopped reading: its status tells
            pipe.write(data)
        with contextlib.suppress(OSError):
            pipe.close()

    @property
    def stderr(self) -> bytes:
        """The tail (at most 64 KiB) of what the command wrote to stderr so far."""
        return bytes(self._stderr)

    def read(self, timeout: float | None = None) -> bytes | None:
        """The next chunk; ``b""`` at the end; ``None`` if ``timeout`` passed first."""
        with self._reading:
            try:
                return self._read(timeout)
            finally:
                if self._closed or self._done:
                    self._release()

    def _read(self, timeout: float | None) -> bytes | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        out = self._proc.stdout
        while True:
            if self._closed or self._done:
                return b""
            wait = POLL
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                wait = min(wait, left)
            for key, _ in self._selector.select(wait):
                if key.fileobj is out:
                    data = self._drain(key.fd)
                    if data is None:  # woken for nothing (another reader took it)
                        continue
                    if data:
                        return data
                    self._finish()
                    return b""
                self._keep_stderr(key, os.read(key.fd, BUFSIZE))

    @staticmethod
    def _drain(fd: int) -> bytes | None:
        """What the (non-blocking) pipe holds now, up to 256 KiB: ``b""`` at its end, None if empty."""
        pieces: list[bytes] = []
        size = 0
        while size < _PIECE:
            try:
                piece = os.read(fd, _PIECE - size)
            except BlockingIOError:
                break
            if not piece:  # the end: what came before it now, the end on the next read
                if not pieces:
                    return b""
                break
            pieces.append(piece)
            size += len(piece)
        if not pieces:
            return None
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def _keep_stderr(self, key: selectors.SelectorKey, data: bytes) -> None:
        if data:
            self._stderr += data
            del self._stderr[: max(0, len(self._stderr) - _STDERR_KEEP)]
        else:
            self._selector.unregister(key.fileobj)

    def _finish(self) -> None:
        self._exit_status = _status(self._proc.wait())
        if self._proc.stdout is not None:
            self._selector.unregister(self._proc.stdout)
        while self._selector.get_map():  # what the command wrote to stderr before it ended
            ready = self._selector.select(0)
            if not ready:
                break
            for key, _ in ready:
                self._keep_stderr(key, os.read(key.fd, BUFSIZE))
        self._done = True

    def _release(self) -> None:
        """Close the pipes (on the reading thread, or by close() when nobody reads: a pipe closed
        under a select could be reused by another file)."""
        if self._selector.get_map() is None:
            return
        self._selector.close()
        for pipe in (self._proc.stdout, self._proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self._forget(self)

    def close(self) -> None:
        """Stop following: end the command's whole session (safe from another thread, twice)."""
        self._closed = True
        _end_session(self._proc)
        if self._reading.acquire(blocking=False):
            try:
                self._release()
            finally:
                self._reading.release()
        with contextlib.suppress(subprocess.TimeoutExpired):
            if self._proc.returncode is None and not self._done:
                self._proc.wait(timeout=5)
