"""The cluster lease the test lanes share (tests/conftest.py): beside tests hold it together, a
disruptive test waits for all of them and holds it alone, and a beside test waits for it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests import conftest


@pytest.fixture
def lease_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "lease.lock"
    monkeypatch.setattr(conftest, "CLUSTER_LEASE", path)
    return path


def _take(alone: bool, got: threading.Event, release: threading.Event) -> threading.Thread:
    def hold() -> None:
        with conftest.cluster_lease(alone=alone):
            got.set()
            release.wait(60)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    return thread


def test_shared_holders_overlap_and_the_one_alone_waits_for_them(lease_file: Path) -> None:
    release_a, release_b, release_x = threading.Event(), threading.Event(), threading.Event()
    a, b, x = threading.Event(), threading.Event(), threading.Event()
    _take(False, a, release_a)
    _take(False, b, release_b)
    assert a.wait(60) and b.wait(60)  # two beside tests at once
    alone = _take(True, x, release_x)
    release_a.set()
    assert not x.wait(1)  # one beside test still holds it
    release_b.set()
    assert x.wait(60)  # the last one left: the disruptive test runs
    y = threading.Event()
    _take(False, y, threading.Event())
    assert not y.wait(1)  # and a beside test waits for it
    release_x.set()
    alone.join(60)
    assert y.wait(60)
