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

import contextlib
import logging
import shlex
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from . import sshconfig
from .closing import ClosedOnExit
from .connection import Connection, connect_once
from .errors import (
    AuthenticationError,
    CommandError,
    CommandTimeout,
    ConnectError,
    HostKeyError,
    OneTimeCodeRequired,
    TransportError,
    checked_argv,
    reason,
    short_argv,
)
from .exchange import CommandResult, exchange, wait_status
from .hostkeys import verify_host_key
from .prompt import CannotPrompt, Prompter, PromptRequest, current_prompter, unavailable
from .stream import RemoteStream
from .target import SSHTarget

if TYPE_CHECKING:
    import paramiko

    from .sshconfig import Route

# The transport's public names, importable from here as before the split into modules.
__all__ = [
    "AuthenticationError",
    "CommandError",
    "CommandResult",
    "CommandTimeout",
    "ConnectError",
    "HostKeyError",
    "OneTimeCodeRequired",
    "RemoteStream",
    "SSHTarget",
    "SSHTransport",
    "TransportError",
    "verify_host_key",
]

log = logging.getLogger(__name__)


def _close_quietly(chan: paramiko.Channel) -> None:
    """Close a channel whose connection may be gone: paramiko then raises EOFError or OSError from
    the close itself, which would hide the ConnectError that says what happened."""
    import paramiko  # loaded on first use, as everywhere in this module

    with contextlib.suppress(EOFError, OSError, paramiko.SSHException):
        chan.close()


class SSHTransport(ClosedOnExit):
    """One shared, self-healing SSH connection to a target; thread-safe.

    ``connect()`` is implicit. If the connection has dropped, the next :meth:`run` or
    :meth:`stream` reconnects, retrying with exponential backoff (``backoff``, doubling, at most
    ``max_backoff`` seconds apart, ``retries`` times) before raising :class:`ConnectError`.
    A command whose connection drops while it runs is never re-run: that raises
    :class:`ConnectError`. Host key and authentication problems are not retried.

    A server that wants a one-time code after the key (keyboard-interactive) gets it from
    ``prompter`` (default: :func:`~.prompt.current_prompter` at the time of asking), once per
    connection: every command and stream shares that connection, and only a reconnect asks again.
    ``label`` (e.g. ``"profile 'hpc'"``) names the connection in prompts and errors.
    """

    def __init__(
        self,
        target: SSHTarget,
        *,
        retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 10.0,
        prompter: Prompter | None = None,
        label: str | None = None,
    ) -> None:
        if retries < 0 or backoff < 0 or max_backoff < 0:
            raise ValueError("retries, backoff and max_backoff must be >= 0")
        self.target = target
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._lock = threading.Lock()
        self._conn: Connection | None = None
        self._streams: weakref.WeakSet[RemoteStream] = weakref.WeakSet()
        self.connections = 0  # successful connections so far (1 + reconnects)
        self.prompter = prompter
        self.label = label
        self.code_prompts = 0  # rounds of one-time code prompts answered (never the answers)
        self._wants_code = False  # the server asked for a code on an earlier connection

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

    def _delay(self, attempt: int) -> float:
        return float(min(self.max_backoff, self.backoff * (2**attempt)))

    def _ensure(self) -> Connection:
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
            self._refuse_early_if_no_code()
            conn = self._connect_with_retries()
            self._conn = conn
            self.connections += 1
            return conn

    def _invalidate(self, conn: Connection) -> None:
        with self._lock:
            if self._conn is conn:
                self._conn = None
        conn.close()

    def _resolve(self) -> Route:
        try:
            return sshconfig.resolve_route(self.target)
        except sshconfig.SSHConfigError as e:
            raise TransportError(str(e)) from None

    def _who(self, where: str | None = None) -> str:
        where = where or str(self.target)
        return f"{self.label} ({where})" if self.label else where

    def _code_required(self, who: str, why: str) -> OneTimeCodeRequired:
        return OneTimeCodeRequired(
            f"{who} asks for a one-time code after the key (keyboard-interactive), and {why}. "
            "Run it where the code can be typed (a notebook in JupyterLab, or a terminal); it is "
            "asked once per connection"
        )

    def _refuse_early_if_no_code(self) -> None:
        """Without a way to ask, a server known to want a code is not even dialled again (a
        background watcher would otherwise log in with the key every few seconds in vain)."""
        if self._wants_code:
            why = unavailable(self.prompter or current_prompter())
            if why:
                raise self._code_required(self._who(), why)

    def _ask(self, request: PromptRequest) -> Sequence[str]:
        """Hand one round of the server's prompts to the prompter (called on the connecting thread)."""
        self._wants_code = True
        who = self._who(request.who)
        prompter = self.prompter or current_prompter()
        try:
            answers = prompter(replace(request, who=who))
        except CannotPrompt as e:
            raise self._code_required(who, str(e)) from None
        self.code_prompts += 1
        return answers

    def _connect_with_retries(self) -> Connection:
        route = self._resolve()
        attempts = self.retries + 1
        for attempt in range(attempts):
            try:
                return connect_once(route, ask=self._ask)
            except AuthenticationError as e:
                if self.label and self._wants_code and not isinstance(e, OneTimeCodeRequired):
                    raise AuthenticationError(f"{self.label}: {e}") from None
                raise
            except ConnectError as e:
                if not e.transient or attempt == attempts - 1:
                    if attempts > 1 and e.transient:
                        raise ConnectError(f"{e} (gave up after {attempts} attempts)",
                                           at_connect=True) from None
                    e.at_connect = True
                    raise
                delay = self._delay(attempt)
                log.info("SSH connect to %s failed (%s); retrying in %.1fs", self.target, e, delay)
                time.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- commands -------------------------------------------------------------------------

    def _open_session(self) -> tuple[paramiko.Channel, Connection]:
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
                log.info("SSH connection to %s is unusable (%s)", self.target, reason(e))
                self._invalidate(conn)
            if attempt < attempts - 1:
                time.sleep(self._delay(attempt) if attempt else 0.0)
        if isinstance(last, paramiko.ChannelException):
            raise TransportError(
                f"{self.target.host} refused to open a session channel ({reason(last)}); "
                "too many concurrent commands for its MaxSessions?"
            )
        raise ConnectError(
            f"cannot open a session on {self.target.host}: "
            f"{reason(last) if last else 'unknown error'}"
        )

    def _start(self, argv: Sequence[str]) -> tuple[tuple[str, ...], paramiko.Channel, Connection]:
        args = checked_argv(argv)
        command = shlex.join(args)
        chan, conn = self._open_session()
        try:
            chan.exec_command(command)
        except Exception as e:
            _close_quietly(chan)  # on a cut connection closing raises too (EOFError): the cut is the news
            if conn.dropped():
                self._invalidate(conn)
                raise ConnectError(
                    f"connection lost while starting `{short_argv(args)}` (it may or may not have run)"
                ) from None
            raise TransportError(
                f"the server refused to run `{short_argv(args)}`: {reason(e)}"
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
            output = exchange(chan, stdin or b"", deadline)
            if output is None or not wait_status(chan, deadline):
                raise CommandTimeout(
                    f"`{short_argv(args)}` did not finish within {timeout:g}s", args, float(timeout or 0)
                )
            status = chan.exit_status
            if status == -1 and conn.dropped():
                self._invalidate(conn)
                raise ConnectError(
                    f"connection lost while running `{short_argv(args)}` "
                    "(it may or may not have completed)"
                )
        finally:
            _close_quietly(chan)
        out, err = output
        result = CommandResult(argv=args, exit_status=status, stdout=out, stderr=err)
        if check and status != 0:
            last = err.decode("utf-8", errors="replace").strip().splitlines()
            detail = f": {last[-1][:200]}" if last else ""
            raise CommandError(f"`{short_argv(args)}` exited with status {status}{detail}", result)
        return result

    def stream(self, argv: Sequence[str], *, timeout: float | None = None,
               stdin: bytes | None = None) -> RemoteStream:
        """Start a long-running command and return its output as a :class:`RemoteStream`.

        ``timeout`` is how long iteration waits for the next chunk before raising
        :class:`CommandTimeout` (``None``: forever). Closing the stream closes the channel;
        make the command end when its output pipe closes (``tail -F`` does, on its next write).
        ``stdin`` (small: a request, never a stream) is sent before stdin is closed.
        """
        args, chan, conn = self._start(argv)
        if stdin:
            chan.sendall(stdin)
        chan.shutdown_write()
        stream = RemoteStream(chan, conn, args, timeout)
        self._streams.add(stream)
        return stream
