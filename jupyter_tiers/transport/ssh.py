"""SSH transport: run commands and follow streams on a remote host over one shared connection.

The only module of jupyter-tiers that uses paramiko, and it imports it lazily (importing this
module stays cheap). Connection settings follow ``~/.ssh/config`` (HostName, User, Port,
IdentityFile, ProxyJump, ProxyCommand, UserKnownHostsFile, ServerAliveInterval, ConnectTimeout,
...). Host keys are always checked against known_hosts: an unknown or changed key raises
:class:`HostKeyError` explaining how to verify and trust it; nothing is ever added to a
known_hosts file automatically.

Typical use::

    t = SSHTransport(SSHTarget("login.cluster"))
    t.run(["squeue", "--me"]).text()
    for chunk in t.stream(["tail", "-F", "log.txt"]):
        ...
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import select
import shlex
import socket
import subprocess
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..errors import TiersError
from . import sshconfig

if TYPE_CHECKING:
    import paramiko

    from .sshconfig import Hop, Route

log = logging.getLogger(__name__)

_BUFSIZE = 65536
_POLL = 0.25  # seconds between housekeeping checks while waiting for a stream's data
_STDERR_KEEP = 65536  # bytes of a stream's stderr kept for diagnostics


# ---------------------------------------------------------------------------------------------
# Public data types and errors
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SSHTarget:
    """Where to connect. ``None`` fields come from ``~/.ssh/config`` (or ssh's defaults).

    ``proxy_jump`` is ``[user@]host[:port]`` hops separated by commas (``"none"`` disables a
    configured ProxyJump). ``connect_timeout`` and ``keepalive`` give way to the config's
    ``ConnectTimeout``/``ServerAliveInterval`` only when left at their defaults.
    """

    host: str
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    proxy_jump: str | None = None
    ssh_config: str | None = None
    connect_timeout: float = 15.0
    keepalive: int = 15

    def __str__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{user}{self.host}{port}"


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


class TransportError(TiersError):
    """Base of the SSH transport's errors. Messages are short, human and carry no secrets."""


class HostKeyError(TransportError):
    """The server's host key is unknown, changed (possible attack) or revoked.

    Attributes name the host and port, the key's type and SHA256 fingerprint, the known_hosts
    files checked, and for a changed or revoked key the file and line that disagree.
    """

    def __init__(
        self,
        message: str,
        *,
        host: str,
        port: int,
        key_type: str,
        fingerprint: str,
        known_hosts: tuple[str, ...],
        changed: bool = False,
        revoked: bool = False,
        file: str | None = None,
        line: int | None = None,
    ) -> None:
        super().__init__(message)
        self.host = host
        self.port = port
        self.key_type = key_type
        self.fingerprint = fingerprint
        self.known_hosts = known_hosts
        self.changed = changed
        self.revoked = revoked
        self.file = file
        self.line = line


class AuthenticationError(TransportError):
    """The server accepted none of our keys (or wants more than key authentication)."""


class ConnectError(TransportError):
    """The server could not be reached (refused, unreachable, timed out, dropped)."""

    def __init__(self, message: str, *, transient: bool = True) -> None:
        super().__init__(message)
        self.transient = transient  # whether trying again later may help


class CommandError(TransportError):
    """A command exited non-zero with ``check=True``; ``.result`` has its output."""

    def __init__(self, message: str, result: CommandResult) -> None:
        super().__init__(message)
        self.result = result


class CommandTimeout(TransportError, TimeoutError):
    """A command (or a stream's wait for its next chunk) took longer than its timeout."""

    def __init__(self, message: str, argv: tuple[str, ...], timeout: float) -> None:
        super().__init__(message)
        self.argv = argv
        self.timeout = timeout


def _short(argv: Sequence[str], limit: int = 80) -> str:
    text = shlex.join(argv)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _reason(exc: BaseException) -> str:
    """A one-line, human reason for a low-level exception."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, EOFError):
        return "connection closed by the server"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


# ---------------------------------------------------------------------------------------------
# Connection (a chain of paramiko transports over one socket)
# ---------------------------------------------------------------------------------------------


class _ProxyCommandSocket:
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


# ---------------------------------------------------------------------------------------------
# Connection (a chain of paramiko transports over one socket)
# ---------------------------------------------------------------------------------------------


class _Connection:
    """The transports of one connection (jump hosts first) and the socket under them."""

    def __init__(self, transports: list[paramiko.Transport], sock: Any, route: Route) -> None:
        self.transports = transports
        self.sock = sock
        self.route = route

    @property
    def transport(self) -> paramiko.Transport:
        return self.transports[-1]

    def alive(self) -> bool:
        return all(t.is_active() for t in self.transports)

    def close(self) -> None:
        for t in reversed(self.transports):
            with contextlib.suppress(Exception):
                t.close()
        with contextlib.suppress(Exception):
            self.sock.close()

    def drop(self) -> None:
        """Cut the socket under the whole connection without any SSH goodbye."""
        if isinstance(self.sock, socket.socket):
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)
        else:  # a ProxyCommand: killing it cuts the connection
            self.sock.close()

    def dropped(self) -> bool:
        """Whether the connection died (checked after a channel closed without exit status).

        paramiko closes a dead transport's channels *before* marking it inactive, so when the
        transport still looks alive we confirm with a round trip (it answers, or it is dead).
        """
        t = self.transport
        if not self.alive() or getattr(t, "saved_exception", None) is not None:
            return True
        try:
            t.global_request("keepalive@openssh.com", wait=True)
        except Exception:
            return True
        return not self.alive()


# ---------------------------------------------------------------------------------------------
# Stream
# ---------------------------------------------------------------------------------------------


class RemoteStream:
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
        connection: _Connection,
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
    def exit_status(self) -> int | None:
        """The command's exit status once it ended; ``None`` while running (or if unknown)."""
        return self._exit_status

    @property
    def stderr(self) -> bytes:
        """The tail (at most 64 KiB) of what the command wrote to stderr so far."""
        self._drain_stderr()
        return bytes(self._stderr)

    @property
    def closed(self) -> bool:
        """True after :meth:`close` or once the command's output ended."""
        return self._closed or self._done

    def __iter__(self) -> RemoteStream:
        return self

    def __next__(self) -> bytes:
        chunk = self.read(self.timeout)
        if chunk is None:
            raise CommandTimeout(
                f"no output from `{_short(self.argv)}` for {self.timeout:g}s",
                self.argv,
                float(self.timeout or 0),
            )
        if not chunk:
            raise StopIteration
        return chunk

    def read(self, timeout: float | None = None) -> bytes | None:
        """The next chunk; ``b""`` at the end of the stream; ``None`` if ``timeout`` passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        chan = self._chan
        while True:
            if self._closed or self._done:
                return b""
            self._drain_stderr()
            wait = _POLL
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                wait = min(wait, left)
            chan.settimeout(wait)
            try:
                data = chan.recv(_BUFSIZE)
            except TimeoutError:
                continue
            except OSError as e:  # pragma: no cover - paramiko reports closure as b""
                if self._closed:
                    return b""
                raise ConnectError(f"stream `{_short(self.argv)}` failed: {_reason(e)}") from None
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
                self._stderr += chan.recv_stderr(_BUFSIZE)
        except OSError:  # pragma: no cover
            return
        if len(self._stderr) > _STDERR_KEEP:
            del self._stderr[: len(self._stderr) - _STDERR_KEEP]

    def _finish(self) -> None:
        chan = self._chan
        while not chan.status_event.wait(_POLL):
            if self._closed:
                return
        self._drain_stderr()
        if chan.exit_status == -1 and self._conn.dropped():
            self._done = True
            chan.close()
            raise ConnectError(
                f"connection lost while following `{_short(self.argv)}`"
            )
        self._exit_status = chan.exit_status
        self._done = True
        chan.close()

    def close(self) -> None:
        """Stop following: close the channel (safe to call from another thread, twice)."""
        self._closed = True
        with contextlib.suppress(Exception):
            self._chan.close()

    def __enter__(self) -> RemoteStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# Transport
# ---------------------------------------------------------------------------------------------


class SSHTransport:
    """One shared, self-healing SSH connection to a target; thread-safe.

    ``connect()`` is implicit. If the connection has dropped, the next :meth:`run` or
    :meth:`stream` reconnects, retrying with exponential backoff (``backoff``, doubling, at most
    ``max_backoff`` seconds apart, ``retries`` times) before raising :class:`ConnectError`.
    A command whose connection drops while it runs is never re-run: that raises
    :class:`ConnectError`. Host key and authentication problems are not retried.
    """

    def __init__(
        self,
        target: SSHTarget,
        *,
        retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 10.0,
    ) -> None:
        if retries < 0 or backoff < 0 or max_backoff < 0:
            raise ValueError("retries, backoff and max_backoff must be >= 0")
        self.target = target
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._lock = threading.Lock()
        self._conn: _Connection | None = None
        self._streams: weakref.WeakSet[RemoteStream] = weakref.WeakSet()
        self.connections = 0  # successful connections so far (1 + reconnects)

    def __repr__(self) -> str:
        state = "connected" if self.connected else "not connected"
        return f"<SSHTransport {self.target} {state}>"

    # -- connection management ------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Whether an authenticated connection is currently up."""
        conn = self._conn
        return conn is not None and conn.alive()

    def connect(self) -> None:
        """Connect now (idempotent: does nothing while a live connection exists)."""
        self._ensure()

    def close(self) -> None:
        """Close the connection and any open streams. A later call reconnects lazily."""
        for stream in list(self._streams):
            stream.close()
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def drop_for_test(self) -> None:
        """Abruptly cut the underlying socket (tests use it to simulate a dropped link)."""
        conn = self._conn
        if conn is not None:
            conn.drop()

    def __enter__(self) -> SSHTransport:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _delay(self, attempt: int) -> float:
        return float(min(self.max_backoff, self.backoff * (2**attempt)))

    def _ensure(self) -> _Connection:
        conn = self._conn
        if conn is not None and conn.alive():
            return conn
        with self._lock:
            conn = self._conn
            if conn is not None and conn.alive():
                return conn
            if conn is not None:
                log.info("SSH connection to %s was lost; reconnecting", self.target)
                self._conn = None
                conn.close()
            conn = self._connect_with_retries()
            self._conn = conn
            self.connections += 1
            return conn

    def _invalidate(self, conn: _Connection) -> None:
        with self._lock:
            if self._conn is conn:
                self._conn = None
        conn.close()

    def _resolve(self) -> Route:
        try:
            return sshconfig.resolve_route(self.target)
        except sshconfig.SSHConfigError as e:
            raise TransportError(str(e)) from None

    def _connect_with_retries(self) -> _Connection:
        route = self._resolve()
        attempts = self.retries + 1
        for attempt in range(attempts):
            try:
                return self._connect_once(route)
            except ConnectError as e:
                if not e.transient or attempt == attempts - 1:
                    if attempts > 1 and e.transient:
                        raise ConnectError(f"{e} (gave up after {attempts} attempts)") from None
                    raise
                delay = self._delay(attempt)
                log.info("SSH connect to %s failed (%s); retrying in %.1fs", self.target, e, delay)
                time.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _connect_once(self, route: Route) -> _Connection:
        first = route.hops[0]
        sock = self._open_socket(first, route)
        transports: list[paramiko.Transport] = []
        try:
            transports.append(self._handshake(first, sock, route, via=None))
            for prev, hop in zip(route.hops, route.hops[1:], strict=False):
                chan = self._open_tunnel(transports[-1], prev, hop, route)
                transports.append(self._handshake(hop, chan, route, via=prev))
        except BaseException:
            for t in reversed(transports):
                t.close()
            with contextlib.suppress(Exception):
                sock.close()
            raise
        log.debug("SSH connected to %s via %d hop(s)", route.target.label, len(route.hops))
        return _Connection(transports, sock, route)

    def _open_socket(self, hop: Hop, route: Route) -> Any:
        if hop.proxy_command:
            try:
                return _ProxyCommandSocket(hop.proxy_command)
            except OSError as e:
                raise ConnectError(
                    f"ProxyCommand for {hop.name} failed to start: {_reason(e)}", transient=False
                ) from None
        where = f"{hop.hostname}:{hop.port}"
        try:
            sock = socket.create_connection((hop.hostname, hop.port), timeout=route.connect_timeout)
        except socket.gaierror as e:
            transient = e.errno in (getattr(socket, "EAI_AGAIN", None),)
            raise ConnectError(
                f"cannot resolve host {hop.hostname!r}: {e.strerror}", transient=transient
            ) from None
        except TimeoutError:
            raise ConnectError(
                f"timed out connecting to {where} after {route.connect_timeout:g}s"
            ) from None
        except OSError as e:
            raise ConnectError(f"cannot connect to {where}: {_reason(e)}") from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            if route.keepalive > 0 and hasattr(socket, "TCP_USER_TIMEOUT"):
                # Like ServerAliveCountMax=3: unacknowledged data for 3 keepalive periods means
                # the link is dead, so reads fail instead of hanging for the kernel's ~15 min.
                ms = max(30, 3 * route.keepalive) * 1000
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, ms)
        except OSError:  # pragma: no cover - best effort
            pass
        return sock

    def _open_tunnel(
        self, t: paramiko.Transport, prev: Hop, hop: Hop, route: Route
    ) -> paramiko.Channel:
        try:
            return t.open_channel(
                "direct-tcpip",
                (hop.hostname, hop.port),
                ("127.0.0.1", 0),
                timeout=route.connect_timeout,
            )
        except Exception as e:
            raise ConnectError(
                f"jump host {prev.hostname} could not connect to {hop.hostname}:{hop.port}: "
                f"{_reason(e)}"
            ) from None

    def _handshake(self, hop: Hop, sock: Any, route: Route, via: Hop | None) -> paramiko.Transport:
        import paramiko

        known = sshconfig.load_known_hosts(
            (*hop.known_hosts_files, *hop.global_known_hosts_files)
        )
        t = paramiko.Transport(sock)
        ok = False
        try:
            timeout = route.connect_timeout
            t.banner_timeout = timeout
            t.handshake_timeout = timeout
            t.auth_timeout = timeout
            _prefer_key_types(t, sshconfig.known_key_types(known, hop.host_key_name))
            try:
                t.start_client(timeout=timeout)
            except paramiko.ssh_exception.IncompatiblePeer as e:
                raise ConnectError(
                    f"SSH negotiation with {hop.hostname}:{hop.port} failed: {_reason(e)}",
                    transient=False,
                ) from None
            except (paramiko.SSHException, EOFError, OSError) as e:
                said = sock.last_words() if isinstance(sock, _ProxyCommandSocket) else ""
                raise ConnectError(
                    f"SSH handshake with {hop.hostname}:{hop.port} failed: {_reason(e)}"
                    + (f" (ProxyCommand said: {said})" if said else "")
                ) from None
            key = t.get_remote_server_key()
            _verify_host_key(hop, key.asbytes(), known, via)
            _authenticate(t, hop)
            # Left-over auth failures must not later look like a dead transport.
            t.saved_exception = None
            t.set_keepalive(route.keepalive)
            ok = True
            return t
        finally:
            if not ok:
                t.close()  # a no-op if the handshake never started: close the socket too
                with contextlib.suppress(Exception):
                    sock.close()

    # -- commands -------------------------------------------------------------------------

    def _open_session(self) -> tuple[paramiko.Channel, _Connection]:
        import paramiko

        last: BaseException | None = None
        attempts = self.retries + 1
        for attempt in range(attempts):
            conn = self._ensure()
            try:
                return conn.transport.open_session(timeout=conn.route.connect_timeout), conn
            except paramiko.ChannelException as e:
                # The server refused a channel on a live connection (MaxSessions reached?).
                last = e
                if not conn.alive():
                    self._invalidate(conn)
            except (paramiko.SSHException, EOFError, OSError) as e:
                last = e
                log.info("SSH connection to %s is unusable (%s)", self.target, _reason(e))
                self._invalidate(conn)
            if attempt < attempts - 1:
                time.sleep(self._delay(attempt) if attempt else 0.0)
        if isinstance(last, paramiko.ChannelException):
            raise TransportError(
                f"{self.target.host} refused to open a session channel ({_reason(last)}); "
                "too many concurrent commands for its MaxSessions?"
            )
        raise ConnectError(
            f"cannot open a session on {self.target.host}: "
            f"{_reason(last) if last else 'unknown error'}"
        )

    def _start(self, argv: Sequence[str]) -> tuple[tuple[str, ...], paramiko.Channel, _Connection]:
        if isinstance(argv, (str, bytes)):
            raise TypeError("argv must be a sequence of arguments, not a string")
        args = tuple(os.fspath(a) for a in argv)
        if not args:
            raise ValueError("argv is empty")
        if not all(isinstance(a, str) for a in args):
            raise TypeError("argv items must be str")
        command = shlex.join(args)
        chan, conn = self._open_session()
        try:
            chan.exec_command(command)
        except Exception as e:
            chan.close()
            if conn.dropped():
                self._invalidate(conn)
                raise ConnectError(
                    f"connection lost while starting `{_short(args)}` (it may or may not have run)"
                ) from None
            raise TransportError(
                f"the server refused to run `{_short(args)}`: {_reason(e)}"
            ) from None
        return args, chan, conn

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        timeout: float | None = 60.0,
        check: bool = True,
    ) -> CommandResult:
        """Run ``argv`` remotely (quoted with :func:`shlex.join`, never pasted) and collect it.

        ``stdin`` is fed to the command (empty stdin if ``None``). ``timeout`` bounds the whole
        command (:class:`CommandTimeout`; the channel is closed). With ``check`` a non-zero exit
        raises :class:`CommandError`. Raises :class:`ConnectError` if the connection drops while
        the command runs (the command is not re-run).
        """
        args, chan, conn = self._start(argv)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            output = _exchange(chan, stdin or b"", deadline)
            if output is None or not _wait_status(chan, deadline):
                raise CommandTimeout(
                    f"`{_short(args)}` did not finish within {timeout:g}s", args, float(timeout or 0)
                )
            status = chan.exit_status
            if status == -1 and conn.dropped():
                self._invalidate(conn)
                raise ConnectError(
                    f"connection lost while running `{_short(args)}` "
                    "(it may or may not have completed)"
                )
        finally:
            chan.close()
        out, err = output
        result = CommandResult(argv=args, exit_status=status, stdout=out, stderr=err)
        if check and status != 0:
            last = err.decode("utf-8", errors="replace").strip().splitlines()
            detail = f": {last[-1][:200]}" if last else ""
            raise CommandError(f"`{_short(args)}` exited with status {status}{detail}", result)
        return result

    def stream(self, argv: Sequence[str], *, timeout: float | None = None) -> RemoteStream:
        """Start a long-running command and return its output as a :class:`RemoteStream`.

        ``timeout`` is how long iteration waits for the next chunk before raising
        :class:`CommandTimeout` (``None``: forever). Closing the stream closes the channel;
        make the command end when its output pipe closes (``tail -F`` does, on its next write).
        """
        args, chan, conn = self._start(argv)
        chan.shutdown_write()
        stream = RemoteStream(chan, conn, args, timeout)
        self._streams.add(stream)
        return stream


# ---------------------------------------------------------------------------------------------
# Helpers (paramiko objects are passed in; nothing imports paramiko at module load)
# ---------------------------------------------------------------------------------------------


def _exchange(
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
    chan.settimeout(_POLL)
    stop = threading.Event()
    err: list[bytes] = []

    def read_stderr() -> None:
        while not stop.is_set():
            try:
                data = chan.recv_stderr(_BUFSIZE)
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
                    sent = chan.send(view[:_BUFSIZE].tobytes())
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
                data = chan.recv(_BUFSIZE)
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


def _wait_status(chan: paramiko.Channel, deadline: float | None) -> bool:
    if deadline is None:
        chan.status_event.wait()
        return True
    return bool(chan.status_event.wait(max(0.0, deadline - time.monotonic())))


def _prefer_key_types(t: paramiko.Transport, known_types: list[str]) -> None:
    """Ask the server for a host key of a type we already know for it (as ssh does)."""
    if not known_types:
        return
    opts = t.get_security_options()
    available = list(opts.key_types)
    wanted: list[str] = []
    for kt in known_types:
        names = ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"] if kt == "ssh-rsa" else [kt]
        wanted += [n for n in names if n in available and n not in wanted]
    if wanted:
        opts.key_types = wanted + [n for n in available if n not in wanted]


def _verify_host_key(
    hop: Hop, blob: bytes, known: list[sshconfig.KnownHostEntry], via: Hop | None
) -> None:
    name = hop.host_key_name
    verdict = sshconfig.check_host_key(known, name, blob)
    if verdict.status == "ok":
        return
    key_type = sshconfig.blob_key_type(blob) or "unknown"
    fp = sshconfig.fingerprint(blob)
    # The file keys are added to, and whichever other files exist (missing defaults are noise).
    checked = tuple(
        p
        for i, p in enumerate((*hop.known_hosts_files, *hop.global_known_hosts_files))
        if i == 0 or os.path.exists(p)
    )
    add_to = hop.known_hosts_files[0] if hop.known_hosts_files else "~/.ssh/known_hosts"
    common: dict[str, Any] = {
        "host": hop.hostname,
        "port": hop.port,
        "key_type": key_type,
        "fingerprint": fp,
        "known_hosts": checked,
    }
    entry = verdict.entry
    if verdict.status == "revoked" and entry is not None:
        raise HostKeyError(
            f"The {key_type} host key {fp} of {name} is marked @revoked in {entry.path} line "
            f"{entry.lineno}; refusing to connect.",
            revoked=True,
            file=entry.path,
            line=entry.lineno,
            **common,
        )
    if verdict.status == "changed" and entry is not None:
        raise HostKeyError(
            f"WARNING: HOST KEY CHANGED for {name}. This could be a man-in-the-middle attack! "
            f"The server sent {key_type} {fp}, but {entry.path} line {entry.lineno} has "
            f"{entry.fingerprint}. Do not connect until the server's admin confirms the new "
            f"key; if the change is expected, remove the old entry with "
            f"`ssh-keygen -R {shlex.quote(name)} -f {shlex.quote(entry.path)}` and add the new "
            "one.",
            changed=True,
            file=entry.path,
            line=entry.lineno,
            **common,
        )
    scan = "ssh-keyscan -t {} {}{}".format(
        sshconfig.keyscan_type(key_type),
        f"-p {hop.port} " if hop.port != sshconfig.DEFAULT_PORT else "",
        shlex.quote(hop.hostname),
    )
    if via is not None:  # only the jump host can reach it
        port = f"-p {via.port} " if via.port != sshconfig.DEFAULT_PORT else ""
        scan = f"ssh {port}{shlex.quote(f'{via.user}@{via.hostname}')} {shlex.quote(scan)}"
    note = ""
    if verdict.other:
        o = verdict.other[0]
        note = (
            f" ({o.path} line {o.lineno} has a {o.key_type} key for it, but the server only "
            f"offered {key_type}.)"
        )
    if hop.host_key_alias:
        how = f"add a line `{name} {key_type} <key>` to {add_to}"
    else:
        how = f"`{scan} >> {shlex.quote(add_to)}`"
    raise HostKeyError(
        f"Unknown host key for {name}: {key_type} {fp}, not found in {', '.join(checked) or add_to}."
        f"{note} Verify this fingerprint with the server's admin, then trust it with {how}.",
        **common,
    )


def _authenticate(t: paramiko.Transport, hop: Hop) -> None:
    """Public-key authentication: identity files, then ssh-agent keys, then default keys."""
    import paramiko

    who = hop.label
    notes: list[str] = []
    rejected = 0

    def attempt(key: paramiko.PKey, label: str) -> bool:
        nonlocal rejected
        try:
            remaining = t.auth_publickey(hop.user, key)
        except paramiko.BadAuthenticationType as e:
            allowed = ", ".join(e.allowed_types) or "nothing"
            raise AuthenticationError(
                f"{who} does not accept public-key authentication (it allows: {allowed})"
            ) from None
        except paramiko.AuthenticationException:
            rejected += 1
            notes.append(f"{label} rejected")
            return False
        except (paramiko.SSHException, EOFError, OSError) as e:
            if t.is_active():
                notes.append(f"{label}: {_reason(e)}")
                return False
            if rejected:
                raise AuthenticationError(
                    f"{who} closed the connection after rejecting {rejected} key(s) "
                    f"({'; '.join(notes[-4:])}); too many keys offered? Set identity_file or "
                    "IdentitiesOnly"
                ) from None
            raise ConnectError(f"connection to {who} lost during authentication") from None
        if remaining:
            raise AuthenticationError(
                f"{who} wants more than a key ({', '.join(remaining)}), which cannot be done "
                "non-interactively"
            )
        return True

    def load(path: str, required: bool) -> paramiko.PKey | None:
        if not os.path.exists(path):
            if required:
                raise AuthenticationError(f"identity file {path} does not exist")
            return None
        try:
            return paramiko.PKey.from_path(path)
        except (TypeError, paramiko.PasswordRequiredException):
            # cryptography raises TypeError for an encrypted key without a passphrase.
            notes.append(f"{path} is passphrase-protected (load it into ssh-agent: ssh-add {path})")
        except Exception as e:
            notes.append(f"{path} unusable ({type(e).__name__})")
        return None

    for path in hop.identity_files:
        key = load(path, path in hop.identity_required)
        if key is not None and attempt(key, path):
            return

    agent_keys: list[paramiko.PKey] = []
    agent: paramiko.Agent | None = None
    try:
        agent = paramiko.Agent()
        agent_keys = list(agent.get_keys())
    except Exception as e:  # a broken agent must not prevent file keys from working
        notes.append(f"ssh-agent unusable ({_reason(e)})")
    try:
        if hop.identities_only:
            wanted = {b for b in (_public_blob(p) for p in hop.identity_files) if b}
            agent_keys = [k for k in agent_keys if k.asbytes() in wanted]
        for akey in agent_keys:
            comment = getattr(akey, "comment", "") or akey.fingerprint
            if attempt(akey, f"agent key {comment}"):
                return
    finally:
        if agent is not None:
            agent.close()

    if hop.look_for_keys:
        for default in sshconfig.DEFAULT_IDENTITIES:
            path = os.path.expanduser(default)
            key = load(path, False)
            if key is not None and attempt(key, path):
                return

    tried = "; ".join(notes[-5:]) if notes else (
        "no keys to offer (no identity_file, no ssh-agent keys, no ~/.ssh/id_* keys)"
    )
    raise AuthenticationError(f"authentication to {who} failed: {tried}")


def _public_blob(private_path: str) -> bytes | None:
    """The key blob of ``<path>.pub``, to match an identity file with an agent key."""
    import base64

    try:
        with open(private_path + ".pub", encoding="utf-8") as f:
            parts = f.read().split()
        return base64.b64decode(parts[1]) if len(parts) >= 2 else None
    except (OSError, ValueError):
        return None
