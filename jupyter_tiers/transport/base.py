"""What the Slurm tier needs of a transport, whichever way its commands travel: over SSH to a
login node (:class:`~.ssh.SSHTransport`) or as subprocesses of this machine
(:class:`~.local.LocalTransport`, Jupyter running on the cluster)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Protocol, TypeVar

from .exchange import CommandResult

_S = TypeVar("_S", bound="CommandStream")


class CommandStream(Protocol):
    """A long-running command's output as ``bytes`` chunks; ``with`` closes it."""

    @property
    def exit_status(self) -> int | None: ...

    @property
    def stderr(self) -> bytes: ...

    def __iter__(self) -> Iterator[bytes]: ...

    def __enter__(self: _S) -> _S: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None: ...

    def close(self) -> None: ...


class Transport(Protocol):
    """Runs argv lists (never strings pasted into a shell) where the cluster's commands are.

    ``run`` collects a command (``CommandTimeout`` past ``timeout``, ``CommandError`` on a
    non-zero exit with ``check``); ``stream`` follows one (``CommandTimeout`` when no chunk comes
    for ``timeout`` seconds). Both raise ``ConnectError`` when the way there is gone.
    """

    label: str | None
    code_prompts: int  # one-time-code prompts answered (always 0 without SSH)

    @property
    def target(self) -> object: ...  # printable: where the commands run

    @property
    def connected(self) -> bool: ...

    def connect(self) -> None: ...

    def close(self) -> None: ...

    def run(self, argv: Sequence[str], *, stdin: bytes | None = None,
            timeout: float | None = 60.0, check: bool = True) -> CommandResult: ...

    def stream(self, argv: Sequence[str], *, timeout: float | None = None,
               stdin: bytes | None = None) -> CommandStream: ...
