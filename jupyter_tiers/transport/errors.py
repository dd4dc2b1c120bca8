"""The SSH transport's errors, and the short wording its messages use (no secrets, one line)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..core.errors import TiersError

if TYPE_CHECKING:
    from .exchange import CommandResult

BUFSIZE = 65536  # bytes asked of a channel per read
POLL = 0.25  # seconds between housekeeping checks while waiting for a channel's data


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


class OneTimeCodeRequired(AuthenticationError):
    """The server wants a one-time code after the key and nobody can be asked for it here
    (a headless run, a background reconnect, no terminal). The message names who asks and why."""


class ConnectError(TransportError):
    """The server could not be reached (refused, unreachable, timed out, dropped)."""

    def __init__(self, message: str, *, transient: bool = True, at_connect: bool = False) -> None:
        super().__init__(message)
        self.transient = transient  # whether trying again later may help
        # True when no connection was made at all (the transport's own retries are spent), as
        # opposed to one that dropped under a command: a caller must not dial again then.
        self.at_connect = at_connect


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


def checked_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """``argv`` as a tuple of str (path-likes converted): a string, an empty list or a non-str
    item is a programming error (TypeError / ValueError), never a command to run."""
    if isinstance(argv, (str, bytes)):
        raise TypeError("argv must be a sequence of arguments, not a string")
    args = tuple(os.fspath(a) for a in argv)
    if not args:
        raise ValueError("argv is empty")
    if not all(isinstance(a, str) for a in args):
        raise TypeError("argv items must be str")
    return args


def short_argv(argv: Sequence[str], limit: int = 80) -> str:
    text = shlex.join(argv)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def reason(exc: BaseException) -> str:
    """A one-line, human reason for a low-level exception."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, EOFError):
        return "connection closed by the server"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__
