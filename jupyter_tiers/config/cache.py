"""Parsed tiers.yaml files, kept while the file is unchanged.

Every magic call loads the profiles; a large file (an admin's /etc/jupyter/tiers.yaml with many
profiles) would be parsed and validated again each time. :func:`load_file_cached` (given the
reader, profiles.load_file) returns a copy of the earlier result while the file's identity, size,
mtime and ctime are the same, and reads it again otherwise. Errors are never cached: a broken file
is reported on every call.
"""

from __future__ import annotations

import copy
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_MAX_ENTRIES = 16
# File timestamps tick with the kernel's coarse clock (milliseconds): two writes of the same size
# within one tick look identical. Like git's "racily clean" check, a file changed in the last
# couple of seconds is not cached, so such a rewrite is always read.
_SETTLED_NS = 2_000_000_000
_cache: dict[tuple[str, bool], tuple[tuple[int, ...], dict[str, Any]]] = {}
_lock = threading.Lock()


def _stamp(path: Path) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def load_file_cached(path: Path, load_file: Callable[..., dict[str, Any]], *,
                     trusted: bool = True) -> dict[str, Any]:
    """``load_file(path, trusted=trusted)`` (profiles.load_file), from a cache while the file is
    unchanged."""
    key = (str(path), trusted)
    before = _stamp(path)
    with _lock:
        hit = _cache.get(key)
    if hit is not None and before is not None and hit[0] == before:
        return copy.deepcopy(hit[1])
    result = load_file(path, trusted=trusted)
    # Keep it only if the file did not change while it was read and has settled.
    if before is None or time.time_ns() - before[3] <= _SETTLED_NS:  # before[3]: mtime
        return result
    if _stamp(path) == before:
        with _lock:
            if len(_cache) >= _MAX_ENTRIES and key not in _cache:
                _cache.pop(next(iter(_cache)))
            _cache[key] = (before, copy.deepcopy(result))
    return result


def clear() -> None:
    """Forget every cached file (tests)."""
    with _lock:
        _cache.clear()
