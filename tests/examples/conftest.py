"""Fixtures of the notebook tests: an isolated kernel environment, the Slurm test cluster's
``sandbox`` profile, and a Kubernetes API emulator with a ``serving`` profile for it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from jupyter_tiers.config import profiles as config
from tests.helpers import cancel_registered_jobs

from .nbrun import ROOT, VENV_BIN


@pytest.fixture
def kernel_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The kernel's environment; also isolates this process (for the clean-up below)."""
    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "no-system-tiers.yaml")
    monkeypatch.setattr(config, "USER_PATH", tmp_path / "no-user-tiers.yaml")
    monkeypatch.delenv("JUPYTER_TIERS_CONFIG", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ)
    env.update(
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        HOME=str(home),  # no ~/.jupyter/tiers.yaml of the machine's user
        JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"),  # the local tier's job directories
        IPYTHONDIR=str(tmp_path / "ipython"),
        JUPYTER_TIERS_DISPLAY="text",
        PYDEVD_DISABLE_FILE_VALIDATION="1",
    )
    yield env
    # Leave no job running (a notebook that failed half-way may have left one).
    cancel_registered_jobs()


@pytest.fixture
def sandbox_env(
    kernel_env: dict[str, str], cluster_env: dict[str, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, str]:
    """kernel_env plus a tiers.yaml holding exactly the ``sandbox`` profile that
    ``jupyter tiers sandbox up`` writes for the running test cluster."""
    from jupyter_tiers.tools import sandbox

    path = tmp_path / "tiers.yaml"
    sandbox.write_profile(path, sandbox.sandbox_profile(cluster_env))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    return {**kernel_env, "JUPYTER_TIERS_CONFIG": str(path)}


@dataclass
class K8sEmulator:
    """A Kubernetes API emulator running as ``python -m tests.k8s_emulator`` (its kubelet runs
    the pods as local processes under ``workdir``) and a fresh namespace in it."""

    kubeconfig: Path
    namespace: str
    workdir: Path


def _processes_under(workdir: Path) -> list[int]:
    """Pids of processes (pods) that run in, or name, ``workdir``: none may outlive the emulator."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cwd = os.readlink(proc / "cwd")
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if cwd.startswith(str(workdir)) or str(workdir) in cmdline:
            found.append(int(proc.name))
    return found


@pytest.fixture
def k8s_emulator(tmp_path: Path) -> Iterator[K8sEmulator]:
    """The emulator in a subprocess of its own session on a free port, stopped (with every pod
    process) after the test."""
    from kubernetes import client
    from kubernetes import config as kube_config

    workdir = tmp_path / "k8s-emulator"
    kubeconfig = tmp_path / "kubeconfig"
    log = (tmp_path / "k8s-emulator.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.k8s_emulator", "--port", "0", "--kubeconfig", str(kubeconfig),
         "--workdir", str(workdir)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=log, start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()  # printed once it serves
        assert url.startswith("http://"), (tmp_path / "k8s-emulator.log").read_text()
        namespace = f"nb-{uuid.uuid4().hex[:8]}"
        api = kube_config.new_client_from_config(config_file=str(kubeconfig))
        with api:
            client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
        yield K8sEmulator(kubeconfig, namespace, workdir)
    finally:
        proc.send_signal(signal.SIGTERM)  # the emulator stops its kubelet, which kills every pod
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()
        orphans = _processes_under(workdir)
        for pid in orphans:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        assert not orphans, f"pod processes outlived the emulator: {orphans}"


@pytest.fixture
def serving_env(
    k8s_emulator: K8sEmulator, kernel_env: dict[str, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, str]:
    """kernel_env plus a tiers.yaml holding a ``serving`` profile for the emulator's namespace.
    (The emulator comes first so that it is stopped last, after kernel_env's clean-up.)"""
    path = tmp_path / "tiers.yaml"
    path.write_text(textwrap.dedent(f"""\
        profiles:
          serving:
            tier: kubernetes
            kubeconfig: {k8s_emulator.kubeconfig}
            namespace: {k8s_emulator.namespace}
            defaults: {{image: "python:3.11-slim"}}
        """))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    return {**kernel_env, "JUPYTER_TIERS_CONFIG": str(path)}




@pytest.fixture
def lab_env(
    kernel_env: dict[str, str], cluster_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> dict[str, str]:
    """kernel_env plus the teaching lab's tiers.yaml: the ``sandbox`` profile (its workdir under
    this test's directory) and ``sandbox-serve``, a local profile whose path_map maps the
    cluster's paths onto themselves (the cluster in a box shares this machine's disk)."""
    from jupyter_tiers.tools import sandbox

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    path = tmp_path / "tiers.yaml"
    sandbox.write_profile(path, {**sandbox.sandbox_profile(cluster_env), "workdir": str(scratch)})
    sandbox.write_profile(path, {"tier": "local", "path_map": {str(scratch): str(scratch)}},
                          name="sandbox-serve")
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    return {**kernel_env, "JUPYTER_TIERS_CONFIG": str(path)}


@pytest.fixture
def pipeline_env(
    k8s_emulator: K8sEmulator, kernel_env: dict[str, str], cluster_env: dict[str, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, str]:
    """kernel_env plus a tiers.yaml with the ``sandbox`` profile of the Slurm test cluster (its
    workdir moved under this test's directory: the cluster's "shared storage") and a ``serving``
    profile for the emulator whose model volume is that storage, as a hostPath with a path_map."""
    from jupyter_tiers.tools import sandbox

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    path = tmp_path / "tiers.yaml"
    sandbox.write_profile(path, {**sandbox.sandbox_profile(cluster_env), "workdir": str(scratch)})
    sandbox.write_profile(path, {
        "tier": "kubernetes",
        "kubeconfig": str(k8s_emulator.kubeconfig),
        "namespace": k8s_emulator.namespace,
        "model_volume": {"host_path": str(scratch), "path_map": {str(scratch): "/"}},
    }, name="serving")
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    return {**kernel_env, "JUPYTER_TIERS_CONFIG": str(path)}
