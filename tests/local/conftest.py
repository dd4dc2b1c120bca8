"""Fixtures of the local-tier tests: a LocalTier on a workdir and registry under tmp_path (real
supervisor, rank shim and rank processes), and a teardown that cancels every job the test left;
and QuietView, a JobView without a front end. Modules that need another teardown
(test_local_tier.py, test_array_view.py, test_checkpoint_modes.py) define their own ``tier``,
which overrides this one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.config.registry import Registry
from jupyter_tiers.faces.widgets.job_view import JobView
from jupyter_tiers.local.tier import LocalTier
from tests.local.test_local_tier import FAST, local_profile


@pytest.fixture
def tier(tmp_path: Path) -> Iterator[LocalTier]:
    """A LocalTier with fast watcher intervals; every job it knows is cancelled afterwards."""
    t = LocalTier(local_profile(tmp_path / "jobs"), Registry(tmp_path / "r.sqlite"), watcher_options=FAST)
    yield t
    for rec in t.registry.list(limit=100):
        t.cancel(rec)
    t.close()


class QuietView(JobView):
    """A JobView without a front end (custom messages dropped)."""

    def send(self, content: Any, buffers: Any = None) -> None:
        pass
