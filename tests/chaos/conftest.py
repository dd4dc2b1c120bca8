"""Fixtures of the bounded chaos run: one emulator for the session (its own, the fast kubelet of
tests/k8s) and a fresh namespace per test; the seed every scenario draws its faults from."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.chaos.scenarios_k8s import emulator_options
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
