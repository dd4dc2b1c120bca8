"""Fixtures of the bounded chaos run: one emulator for the session (its own, the fast kubelet of
tests/k8s) and a fresh namespace per test; the seed every scenario draws its faults from (the
date's, so that CI does not run one schedule forever; printed with how to replay it)."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers.config.profiles import load_config
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.slurm.tier import SlurmTier
from tests.chaos.scenarios_k8s import emulator_options
from tests.chaos.schedules import ci_seed, replay_line
from tests.cluster.conftest import profile_yaml
from tests.k8s_emulator.emulator import Emulator
from tests.k8s_emulator.fixtures import k8s_namespace  # noqa: F401

#: The bounded run's seed: the UTC date's (20261204 on 4 Dec 2026), or ``JT_CHAOS_SEED``.
SEED, SEED_SOURCE = ci_seed(os.environ, dt.datetime.now(dt.timezone.utc).date())
REPLAY = replay_line(SEED, SEED_SOURCE)


@pytest.fixture(scope="session")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    emu = Emulator(tmp_path_factory.mktemp("chaos-emulator"), **emulator_options())
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def seed() -> int:
    """The schedule's seed; said in the test's output (shown with a failure) and at the end."""
    print(REPLAY)
    return SEED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The seed and how to replay it, once at the end of any run that collected a chaos test."""
    reports = [r for seen in terminalreporter.stats.values() for r in seen if hasattr(r, "nodeid")]
    if any(r.nodeid.startswith("tests/chaos/") for r in reports):
        terminalreporter.write_line(REPLAY)


@pytest.fixture
def slurm_tier(cluster_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
               ) -> Iterator[SlurmTier]:
    """A Slurm tier on the test cluster with a registry of its own; its jobs are cancelled after."""
    path = tmp_path / "tiers.yaml"
    path.write_text(profile_yaml(cluster_env))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    tier = SlurmTier(load_config().profile("box"), Registry(tmp_path / "registry.sqlite"))
    yield tier
    for rec in tier.registry.list(limit=100):
        tier.cancel(rec)
    tier.close()
