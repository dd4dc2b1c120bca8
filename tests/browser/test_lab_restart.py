"""The Jupyter server restarted under two open "Tiers" sidebars (issue 18, item 4): the bounded
run of tests/chaos/scenarios_lab.py, one restart by SIGTERM and one by SIGKILL.

The JupyterLab here is this test's own (it is stopped and started again on its port, so never the
session's shared one), with one local profile: no cluster. Nothing is timed as an assertion; every
wait is bounded only so that a broken component fails instead of hanging.
"""

from __future__ import annotations

import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.config.profiles import load_config
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.local.tier import LocalTier
from tests.chaos.conftest import REPLAY, SEED
from tests.chaos.scenarios_lab import lab_restarts
from tests.helpers import free_port

from . import conftest
from .conftest import LabProcess, _lab_process

pytestmark = [pytest.mark.browser]


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[LabProcess]:
    """A JupyterLab of this test alone, with one local profile ``laptop``."""
    base = tmp_path / "lab"
    base.mkdir()
    tiers_yaml = f"profiles:\n  laptop:\n    tier: local\n    workdir: {tmp_path / 'work'}\n"
    with _lab_process(base, tiers_yaml) as process:
        yield process


@pytest.fixture
def laptop(restartable: LabProcess, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalTier]:
    """The ``laptop`` tier on the server's registry, as a notebook's kernel would have it."""
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(restartable.server.config))
    tier = LocalTier(load_config().profile("laptop"), Registry(restartable.server.registry))
    try:
        yield tier
    finally:
        for rec in tier.registry.list(limit=100):
            tier.cancel(rec)  # harmless on ended jobs
        tier.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_two_sidebar_tabs_reconnect_once_after_a_server_restart(
    page: Any, restartable: LabProcess, laptop: LocalTier, tmp_path: Path, sig: signal.Signals
) -> None:
    """Each tab reconnects exactly once, shows every row once, the final state of a job that ended
    while the server was down, and is live again (a later job, a cancel from one tab)."""
    gates = tmp_path / "gates"
    gates.mkdir()
    print(REPLAY)  # the schedule's seed (the date's), shown with a failure
    outcome = lab_restarts(restartable, laptop, [page, page.context.new_page()], gates,
                           seed=SEED, restarts=1, signals=[sig])
    assert outcome.faults == 1
    assert outcome.checked == 2 * (3 + 3 + 4)  # rows checked in each tab: down, back, end of round
    assert outcome.clean, (outcome.problems, outcome)
    assert page.jt_dialogs == [], page.jt_dialogs


def test_a_first_start_whose_port_was_taken_meanwhile_takes_another(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The port ``free_port`` found free is taken by another process before the server binds it
    (a loaded machine takes seconds to start one): the first start takes another free port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = iter([port])
        monkeypatch.setattr(conftest, "free_port", lambda: next(ports, None) or free_port())
        base = tmp_path / "lab"
        base.mkdir()
        tiers_yaml = f"profiles:\n  laptop:\n    tier: local\n    workdir: {tmp_path / 'work'}\n"
        with _lab_process(base, tiers_yaml) as process:
            assert process.server.url != f"http://127.0.0.1:{port}"
            assert f"--port={port}" not in process.cmd
            assert isinstance(process.server.api("/api/status"), dict)  # it serves, on the new port
            assert "already in use" in process.server.log.read_text(errors="replace")
