"""``with`` for the transport's objects that end with ``close()`` (the transport, a stream), and
what every command's output stream shares (:class:`ChunkStream`)."""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

from .errors import CommandTimeout, short_argv

_C = TypeVar("_C", bound="ClosedOnExit")


class ClosedOnExit:
    """Mixin: ``with obj as same:`` gives ``obj`` back and calls ``obj.close()`` however the block
    ends (exceptions are not swallowed)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class ChunkStream(ClosedOnExit):
    """A running command's output as an iterator of ``bytes`` chunks (the SSH transport's
    RemoteStream and the local one's LocalStream): iteration ends at the output's end and raises
    :class:`CommandTimeout` when ``timeout`` seconds pass without a chunk (iterate again to keep
    waiting). A subclass sets ``argv``, ``timeout``, ``_closed``, ``_done`` and ``_exit_status``
    and reads with :meth:`read`."""

    argv: tuple[str, ...]
    timeout: float | None
    _closed: bool
    _done: bool
    _exit_status: int | None

    def read(self, timeout: float | None = None) -> bytes | None:
        """The next chunk; ``b""`` at the end; ``None`` if ``timeout`` passed first."""
        raise NotImplementedError

    @property
    def exit_status(self) -> int | None:
        """The command's exit status once its output ended; ``None`` while it runs (or unknown)."""
        return self._exit_status

    @property
    def closed(self) -> bool:
        """True after :meth:`close` or once the command's output ended."""
        return self._closed or self._done

    def __iter__(self) -> ChunkStream:
        return self

    def __next__(self) -> bytes:
        chunk = self.read(self.timeout)
        if chunk is None:
            raise CommandTimeout(f"no output from `{short_argv(self.argv)}` for {self.timeout:g}s",
                                 self.argv, float(self.timeout or 0))
        if not chunk:
            raise StopIteration
        return chunk
