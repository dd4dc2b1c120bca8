"""Fixtures of the bounded chaos run: one emulator for the session (its own, the fast kubelet of
tests/k8s) and a fresh namespace per test; the seed every scenario draws its faults from."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers.config import load_config
from jupyter_tiers.registry import Registry
from jupyter_tiers.slurm.tier import SlurmTier
from tests.chaos.scenarios_k8s import emulator_options
from tests.cluster.conftest import profile_yaml
from tests.k8s_emulator.emulator import Emulator
from tests.k8s_emulator.fixtures import k8s_namespace  # noqa: F401

#: The bounded run's seed (``JT_CHAOS_SEED`` replays another schedule).
SEED = int(os.environ.get("JT_CHAOS_SEED", "18"))


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
    return SEED


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
