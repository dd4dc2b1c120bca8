"""``with`` for the transport's objects that end with ``close()`` (the transport, a stream)."""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

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
