"""Fixtures for the emulator's own tests: a bare emulator (no kubelet, no controllers) with short
bookmarks, and clients built from its kubeconfig."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.k8s_emulator.emulator import Emulator
from tests.k8s_emulator.fixtures import emulator, k8s_namespace  # noqa: F401
from tests.k8s_emulator.kubelet import Kubelet
from tests.k8s_emulator.store import Store

GOLDEN = Path("/work/shared/facts/k8s-golden")
KUBELET_NS = "default"


@pytest.fixture
def store() -> Store:
    """A bare Store with the ``default`` namespace, for driving the kubelet without HTTP."""
    s = Store()
    s.create("namespaces", {"metadata": {"name": KUBELET_NS}})
    return s


@pytest.fixture
def kubelet(store: Store, tmp_path: Path) -> Iterator[Kubelet]:
    """A started kubelet on ``store`` (node n1, short back-off), stopped afterwards."""
    k = Kubelet(store, tmp_path / "kubelet", backoff_base=0.5, node_labels={"kubernetes.io/hostname": "n1"})
    k.start()
    try:
        yield k
    finally:
        k.stop()


@pytest.fixture(scope="session")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    """API server + store only, bookmarks every second."""
    emu = Emulator(
        tmp_path_factory.mktemp("bare-emulator"),
        bookmark_interval=1.0,
        with_kubelet=False,
        with_controllers=False,
    )
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def api(bare: Emulator) -> client.ApiClient:
    """An ApiClient loaded the ordinary way, from the kubeconfig the emulator wrote."""
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(bare.kubeconfig_path), client_configuration=cfg)
    return client.ApiClient(cfg)


@pytest.fixture
def ns(bare: Emulator) -> Iterator[str]:
    """A fresh namespace in the bare emulator."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    bare.create_namespace(name)
    yield name
    bare.delete_namespace(name)


def deployment(name: str, replicas: int = 2, env_value: str = "1") -> dict:
    """The Deployment manifest the golden recordings applied."""
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "jupyter-tiers"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "server",
                            "image": "python:3.11-slim",
                            "command": ["python3", "-m", "http.server"],
                            "env": [{"name": "TIER_REVISION", "value": env_value}],
                            "ports": [{"name": "http", "containerPort": 8000}],
                            "readinessProbe": {"httpGet": {"path": "/", "port": 8000}, "periodSeconds": 1},
                        }
                    ]
                },
            },
        },
    }
