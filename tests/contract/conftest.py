"""The backends the contract suites run on, and where they legitimately differ.

Every contract test takes ``batch`` (a :class:`BatchBackend`) or ``serve`` (a
:class:`ServeBackend`) and is written once; these fixtures run it on each backend of that
interface:

- batch: ``slurm`` (SlurmTier on tests/contract/fake_slurm.py: no environment, so it runs in
  ``--fast``), ``slurm_here`` (SlurmTier on the real test cluster through LocalTransport, as on
  a cluster's own Jupyter: ``slurm``) and ``local`` (LocalTier with real supervisors:
  ``local_procs``);
- serve: ``kubernetes`` (K8sTier on the emulator: ``k8s_emulator``) and ``local``
  (LocalServeTier with real supervisors and replicas: ``local_procs``).

Each param carries its environment's marker (``BACKEND_ENVIRONMENTS`` in tests/conftest.py), so
``-m``/``--fast`` select on them as on any other test. The tier of a backend lives for the
module (one registry and work directory), so the processes a job or a service costs are paid
once per module, not per test.

What a backend declares it cannot do is in CAPABILITIES, nowhere else: a test asks
``backend.can("history")`` and asserts the promised refusal when it cannot.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.engine.tier import BatchTier, ServeTier
from jupyter_tiers.local.serve_tier import LocalServeTier
from jupyter_tiers.local.tier import LocalTier
from jupyter_tiers.slurm.tier import SlurmTier
from jupyter_tiers.transport.local import LocalTransport
from tests.conftest import BACKEND_ENVIRONMENTS
from tests.contract.fake_slurm import FakeSlurm
from tests.helpers import local_profile, processes_mentioning, wait_for
from tests.local_serve.conftest import stop_everything

GUARD = 120.0  # seconds; bounds every wait so a broken backend fails instead of hanging

#: What each backend can do beyond the interface every backend must honour; False means the
#: method raises the interface's declared refusal (Unsupported, with the words users see).
CAPABILITIES: dict[str, dict[str, bool]] = {
    # history/output_tail: Slurm accounting (sacct). login: an SSH connection to log in to.
    "batch/slurm": {"history": True, "login": True},
    "batch/slurm_here": {"history": True, "login": True},
    "batch/local": {"history": False, "login": False},
    # rollback to a revision: a Deployment's ReplicaSet history (the local tier keeps none).
    "serve/kubernetes": {"revision_history": True},
    "serve/local": {"revision_history": False},
}


@dataclass
class Backend:
    interface: str  # "batch" | "serve"
    name: str  # the param: slurm | slurm_here | local | kubernetes (the tier's backend is tier.backend)

    def can(self, capability: str) -> bool:
        """Whether this backend has ``capability`` (CAPABILITIES; an unknown name is a test bug)."""
        return CAPABILITIES[f"{self.interface}/{self.name}"][capability]


@dataclass
class BatchBackend(Backend):
    tier: BatchTier


@dataclass
class ServeBackend(Backend):
    tier: ServeTier


def backend_params(interface: str) -> list[Any]:
    """One param per backend of ``interface``, marked with the environment it needs."""
    params = []
    for key, environment in BACKEND_ENVIRONMENTS.items():
        of, name = key.split("/")
        if of == interface:
            marks = [getattr(pytest.mark, environment)] if environment else []
            params.append(pytest.param(name, id=name, marks=marks))
    return params


# --- batch ---------------------------------------------------------------------------------
FAST_WATCHER = {"status_interval": 0.3, "rank_interval": 0.2, "first_poll": 0.05}


def _slurm(root: Path, request: pytest.FixtureRequest) -> Iterator[BatchTier]:
    fake = FakeSlurm(root)
    profile = Profile(name="hpc", tier="slurm", settings={
        "host": "fake1", "workdir": str(root / "jobs"), "status_interval": 0.3, "rank_interval": 0.2})
    tier = SlurmTier(profile, Registry(root / "registry.sqlite"), transport=fake)  # type: ignore[arg-type]  # FakeSlurm has what SlurmTier uses of SSHTransport
    try:
        yield tier
    finally:
        tier.close()
        fake.close()
        wait_for(lambda: not processes_mentioning(root), "every process of the fake cluster to end", GUARD)


def _slurm_here(root: Path, request: pytest.FixtureRequest) -> Iterator[BatchTier]:
    """The real test cluster's commands run on this machine (no SSH): a profile without host,
    as the built-in ``cluster`` profile of a Jupyter running on the cluster."""
    env = request.getfixturevalue("cluster_env")
    venv = Path(sys.executable).parent
    profile = Profile(name="cluster", tier="slurm", settings={
        "workdir": str(root / "jobs"), "status_interval": 1.0, "rank_interval": 0.5},
        defaults={"partition": "debug", "time": "00:10:00", "python": str(venv / "python")},
        setup=(f"source {venv}/activate",))
    transport = LocalTransport(environ={**os.environ, "SLURM_CONF": env["SLURM_CONF"]})
    tier = SlurmTier(profile, Registry(root / "registry.sqlite"), transport=transport)
    try:
        yield tier
    finally:
        for rec in tier.registry.list(limit=1000):
            tier.cancel(rec)
        tier.close()


def _local_batch(root: Path, request: pytest.FixtureRequest) -> Iterator[BatchTier]:
    tier = LocalTier(local_profile(root / "jobs"), Registry(root / "registry.sqlite"),
                     watcher_options=FAST_WATCHER)
    try:
        yield tier
    finally:
        for rec in tier.registry.list(limit=1000):
            tier.cancel(rec)
        tier.close()
        wait_for(lambda: not processes_mentioning(root / "jobs"), "every process of the local jobs to end",
                 GUARD)


BATCH_MAKERS = {"slurm": _slurm, "slurm_here": _slurm_here, "local": _local_batch}


@pytest.fixture(scope="module", params=backend_params("batch"))
def batch(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BatchBackend]:
    """A batch tier of each backend, for the module."""
    root = tmp_path_factory.mktemp(f"batch-{request.param}")
    maker = BATCH_MAKERS[request.param]
    for tier in maker(root, request):
        yield BatchBackend("batch", request.param, tier)


# --- serve ---------------------------------------------------------------------------------
IMAGE = "python:3.11-slim"


@pytest.fixture(scope="session")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The Kubernetes emulator (only the kubernetes param asks for it), with tests/k8s's fast
    kubelet: crash back-off from 1 s, probes four times faster than their periods say."""
    from tests.k8s_emulator.emulator import Emulator

    emu = Emulator(tmp_path_factory.mktemp("contract-emulator"),
                   kubelet_options={"backoff_base": 1.0, "probe_period": 0.25})
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


def _kubernetes(root: Path, request: pytest.FixtureRequest) -> Iterator[ServeTier]:
    from jupyter_tiers.k8s.tier import K8sTier

    emu = request.getfixturevalue("emulator")
    namespace = f"c-{uuid.uuid4().hex[:10]}"
    emu.create_namespace(namespace)
    profile = Profile(name="serving", tier="kubernetes", settings={
        "kubeconfig": str(emu.kubeconfig_path), "namespace": namespace, "request_timeout": 10},
        defaults={"image": IMAGE}, sources=("test",))
    tier = K8sTier(profile, Registry(root / "registry.sqlite"))
    try:
        yield tier
    finally:
        tier.close()
        emu.delete_namespace(namespace)


def _local_serve(root: Path, request: pytest.FixtureRequest) -> Iterator[ServeTier]:
    registry = Registry(root / "registry.sqlite")
    tier = LocalServeTier(local_profile(root / "work"), registry, poll_interval=0.1)
    try:
        yield tier
    finally:
        tier.close()
        stop_everything(root / "work", registry)


SERVE_MAKERS = {"kubernetes": _kubernetes, "local": _local_serve}


@pytest.fixture(scope="module", params=backend_params("serve"))
def serve(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeBackend]:
    """A serving tier of each backend, for the module."""
    root = tmp_path_factory.mktemp(f"serve-{request.param}")
    for tier in SERVE_MAKERS[request.param](root, request):
        yield ServeBackend("serve", request.param, tier)
