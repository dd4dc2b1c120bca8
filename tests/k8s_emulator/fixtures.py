"""pytest fixtures for tests that need the Kubernetes emulator.

Use from a ``conftest.py``::

    from tests.k8s_emulator.fixtures import emulator, k8s_namespace  # noqa: F401

``emulator`` is session-scoped (store, API server, controllers and kubelet when available);
``k8s_namespace`` is a fresh namespace per test, deleted afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from .emulator import Emulator


@pytest.fixture(scope="session")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    """A running emulator; ``emulator.kubeconfig_path`` is an admin kubeconfig (context ``emulator``)."""
    emu = Emulator(tmp_path_factory.mktemp("k8s-emulator"))
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def k8s_namespace(emulator: Emulator) -> Iterator[str]:
    """The name of a new, empty namespace (with ``kube-root-ca.crt``), deleted after the test."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    emulator.create_namespace(name)
    try:
        yield name
    finally:
        emulator.delete_namespace(name)
