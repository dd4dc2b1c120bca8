"""A real JupyterLab server and headless Debian chromium driven by Playwright.

The server runs from a temporary root dir with its own Jupyter config/data/runtime dirs (so no
remembered workspace or user setting changes what the test sees), a tiers.yaml
(``JUPYTER_TIERS_CONFIG``) and its own job registry (``JUPYTER_TIERS_REGISTRY``); kernels it starts
inherit both. ``lab``'s tiers.yaml has the ``box`` profile of the Slurm test cluster; ``serve_lab``'s
has the ``serving`` profile of a Kubernetes API emulator (tests/k8s_emulator) started in this
process, in a fresh namespace.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.config.profiles import load_config
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.slurm.tier import SlurmTier
from tests.cluster.conftest import profile_yaml
from tests.helpers import free_port, loud_skip, processes_mentioning
from tests.k8s_emulator.emulator import Emulator

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "test-output"
CHROMIUM = Path(os.environ.get("JT_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Every wait in these tests is bounded by one of these (milliseconds for Playwright).
SERVER_START_S = 90
UI_TIMEOUT_MS = 60_000
JOB_TIMEOUT_MS = 180_000
# One REST call to the Lab (its extension's may ask a cluster: sacct over SSH for the history).
API_TIMEOUT_S = 60


def _missing(reason: str) -> None:
    loud_skip("browser tests", reason)


@dataclass
class Lab:
    """A running JupyterLab: where it serves, its root dir, and the files it was given."""

    url: str
    token: str
    root: Path
    config: Path
    registry: Path
    log: Path

    def notebook_url(self, name: str) -> str:
        # ?reset: start from an empty workspace, whatever a previous page left behind.
        return f"{self.url}/lab/tree/{name}?reset&token={self.token}"

    def api(self, path: str, method: str = "GET") -> Any:
        req = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=API_TIMEOUT_S) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"


def _require_browser_tools() -> None:
    if not CHROMIUM.exists():
        _missing(f"{CHROMIUM} missing (tests/run.sh installs Debian's chromium as root)")
    if shutil.which("jupyter-lab", path=str(Path(sys.executable).parent)) is None:
        _missing("jupyterlab is not installed (pip install -e '.[test]')")


@dataclass
class LabProcess:
    """One JupyterLab's command line and environment, and its current process: ``start`` again
    after the process died serves the same root dir on the same port with the same token."""

    server: Lab
    cmd: list[str]
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    served: bool = False  # it answered once: its URL is known, a restart keeps its port

    def start(self) -> None:
        """Start ``jupyter lab`` and wait until it answers ``/api/status``. Its port may linger a
        moment after the previous process died: a start that cannot bind it is tried again. The
        first start takes another free port instead (another process may have taken the one
        ``free_port`` found free a moment before, in the seconds a loaded machine takes to start
        the server)."""
        deadline = time.monotonic() + SERVER_START_S
        while True:
            with self.server.log.open("ab") as out:
                proc = subprocess.Popen(self.cmd, cwd=self.server.root, env=self.env, stdout=out,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
            self.proc = proc
            while proc.poll() is None:
                try:
                    self.server.api("/api/status")
                    self.served = True
                    return
                except (OSError, urllib.error.URLError):
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"jupyter lab did not answer /api/status in {SERVER_START_S}s:\n"
                                f"{self.server.log_tail()}")
                time.sleep(0.3)
            if time.monotonic() > deadline or "already in use" not in self.server.log_tail(5):
                pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{self.server.log_tail()}")
            if not self.served:
                port = free_port()
                self.cmd = [f"--port={port}" if a.startswith("--port=") else a for a in self.cmd]
                self.server.url = f"http://127.0.0.1:{port}"
            time.sleep(0.5)

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the server process (not its kernels) and wait until it has exited."""
        assert self.proc is not None and self.proc.poll() is None, "the server is not running"
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=SERVER_START_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"jupyter lab still runs {SERVER_START_S}s after signal {sig}:\n"
                        f"{self.server.log_tail()}")

    def stop(self) -> None:
        """Stop the running server (and its kernels), and whatever a killed one left behind: any
        process with this server's runtime dir in its environment (its kernels inherit it)."""
        if self.proc is not None:
            _stop_server(self.server, self.proc)
        for pid, _ in processes_mentioning(self.env["JUPYTER_RUNTIME_DIR"], skip_zombies=True):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextmanager
def _lab_process(base: Path, tiers_yaml: str, extra_env: Mapping[str, str] | None = None,
                 launch: Callable[[list[str]], list[str]] | None = None) -> Iterator[LabProcess]:
    """Start ``jupyter lab`` under ``base`` with ``tiers_yaml`` as its kernels' tiers.yaml (and
    ``extra_env`` added to its environment; ``launch`` turns its command line into the one run,
    e.g. a Slurm job's); stop it (and its kernels) on exit. This checkout's
    labextension build, when there is one, is the one the page loads (not another checkout's that
    the environment may have installed)."""
    _require_browser_tools()
    root = base / "root"
    root.mkdir()
    config = base / "tiers.yaml"
    config.write_text(tiers_yaml)
    registry = base / "registry.sqlite"
    jupyter_config = base / "jupyter-config"
    # No announcements/news toast over the notebook.
    (jupyter_config / "labconfig").mkdir(parents=True)
    (jupyter_config / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    env = dict(os.environ)
    built = ROOT / "jupyter_tiers" / "labextension"
    if (built / "package.json").exists():
        # JUPYTER_PATH comes before the environment's share/jupyter (which a venv puts first).
        (base / "checkout" / "labextensions").mkdir(parents=True)
        (base / "checkout" / "labextensions" / "jupyter-tiers").symlink_to(built)
        env["JUPYTER_PATH"] = os.pathsep.join(
            p for p in (str(base / "checkout"), os.environ.get("JUPYTER_PATH", "")) if p)
    env = {
        **env,
        "JUPYTER_TIERS_CONFIG": str(config),
        "JUPYTER_TIERS_REGISTRY": str(registry),
        "JUPYTER_CONFIG_DIR": str(jupyter_config),
        "JUPYTER_DATA_DIR": str(base / "jupyter-data"),
        "JUPYTER_RUNTIME_DIR": str(base / "jupyter-runtime"),
        "IPYTHONDIR": str(base / "ipython"),
        "PYTHONUNBUFFERED": "1",
        **(extra_env or {}),
    }
    env.pop("JUPYTER_TIERS_DISPLAY", None)
    token = secrets.token_hex(24)
    port = free_port()
    cmd = [
        str(Path(sys.executable).parent / "jupyter-lab"),
        "--no-browser",
        f"--ServerApp.token={token}",
        "--ServerApp.ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.workspaces_dir={base / 'workspaces'}",
        f"--LabApp.user_settings_dir={base / 'user-settings'}",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    if launch is not None:
        cmd = launch(cmd)
    server = Lab(url=f"http://127.0.0.1:{port}", token=token, root=root, config=config,
                 registry=registry, log=base / "jupyter-lab.log")
    process = LabProcess(server, cmd, env)
    try:
        process.start()
        yield process
    finally:
        process.stop()


@contextmanager
def _running_lab(base: Path, tiers_yaml: str, extra_env: Mapping[str, str] | None = None
                 ) -> Iterator[Lab]:
    """Start ``jupyter lab`` under ``base`` with ``tiers_yaml`` as its kernels' tiers.yaml (and
    ``extra_env`` added to its environment); stop it (and its kernels) on exit."""
    with _lab_process(base, tiers_yaml, extra_env) as process:
        yield process.server


#: A second profile of the test cluster in the shared lab: ``box`` with a rank beat a second (the
#: default is 10 s), for tests that watch per-rank use; a kernel cannot set it for an SSH job.
BEAT_PROFILE = "boxbeat"


def _shared_lab_yaml(cluster_env: dict[str, str]) -> str:
    beat = profile_yaml(cluster_env, name=BEAT_PROFILE).split("\n", 1)[1]
    assert 'setup: ["source' in beat
    beat = beat.replace('setup: ["source', 'setup: ["export JT_HEARTBEAT=1", "source', 1)
    return profile_yaml(cluster_env) + beat


@contextmanager
def _cluster_lab(cluster_env: dict[str, str], base: Path, tiers_yaml: str | None = None) -> Iterator[Lab]:
    server: Lab | None = None
    try:
        with _running_lab(base, tiers_yaml or profile_yaml(cluster_env)) as server:
            yield server
    finally:
        if server is not None:
            _cancel_leftover_jobs(server.config, server.registry)


@pytest.fixture(scope="session")
def shared_lab(cluster_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """One JupyterLab with the ``box`` (and ``boxbeat``) profile for every module that sets
    ``SHARED_LAB = True``."""
    _require_browser_tools()
    with _cluster_lab(cluster_env, tmp_path_factory.mktemp("shared-lab"),
                      _shared_lab_yaml(cluster_env)) as server:
        yield server


@contextmanager
def _module_kernels_shut(server: Lab) -> Iterator[None]:
    """Shut down the kernels a module started on a shared server when the module ends."""
    kernels = {k["id"] for k in server.api("/api/kernels")}
    try:
        yield
    finally:
        for kernel in server.api("/api/kernels"):
            if kernel["id"] not in kernels:
                with suppress(OSError, urllib.error.URLError):
                    server.api(f"/api/kernels/{kernel['id']}", method="DELETE")


@pytest.fixture(scope="session")
def _local_lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    _require_browser_tools()
    with _running_lab(tmp_path_factory.mktemp("local-lab"), "profiles: {}\n") as server:
        yield server


@pytest.fixture(scope="module")
def local_lab(_local_lab_server: Lab) -> Iterator[Lab]:
    """JupyterLab without a cluster: its kernels have only the built-in ``local`` profile. One
    server for every module whose tests run only local jobs (their notebooks and job names are
    their own), so they run in the lane beside the Slurm cluster's; a module's kernels are shut
    down when it ends."""
    with _module_kernels_shut(_local_lab_server):
        yield _local_lab_server


@pytest.fixture(scope="module")
def lab(request: pytest.FixtureRequest, cluster_env: dict[str, str],
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """JupyterLab whose kernels see the ``box`` profile of the Slurm test cluster.

    A module that sets ``SHARED_LAB = True`` (its notebooks, job names and checks never look at
    another module's) gets the session's one server, saving a server start and stop; its kernels
    are shut down and its jobs cancelled when it ends. The others get a server of their own: the
    sidebar's tests, for one, count every job in the server's registry."""
    _require_browser_tools()
    if not getattr(request.module, "SHARED_LAB", False):
        with _cluster_lab(cluster_env, tmp_path_factory.mktemp("lab")) as server:
            yield server
        return
    server = request.getfixturevalue("shared_lab")
    jobs = {rec.job_id for rec in Registry(server.registry).list(limit=1000)}
    with _module_kernels_shut(server):
        try:
            yield server
        finally:
            _cancel_leftover_jobs(server.config, server.registry, keep=jobs)


@dataclass
class ServeCluster:
    """The Kubernetes API emulator behind ``serve_lab`` and the namespace its profile uses."""

    emulator: Emulator
    namespace: str


@pytest.fixture(scope="module")
def serve_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeCluster]:
    """A Kubernetes API emulator (API server, controllers, kubelet running pods as local
    processes) in this process, with a fresh namespace; stopping it kills every pod process."""
    _require_browser_tools()  # skip before starting anything the tests cannot use
    emu = Emulator(tmp_path_factory.mktemp("k8s-emulator"))
    emu.start()
    try:
        namespace = f"ui-{uuid.uuid4().hex[:8]}"
        emu.create_namespace(namespace)
        yield ServeCluster(emu, namespace)
    finally:
        emu.stop()


def serving_profile_yaml(cluster: ServeCluster) -> str:
    return textwrap.dedent(
        f"""\
        profiles:
          serving:
            tier: kubernetes
            kubeconfig: {cluster.emulator.kubeconfig_path}
            namespace: {cluster.namespace}
            defaults: {{image: "python:3.11-slim"}}
        """
    )


@pytest.fixture(scope="module")
def serve_lab(serve_cluster: ServeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """JupyterLab whose kernels see the ``serving`` profile of ``serve_cluster``."""
    base = tmp_path_factory.mktemp("serve-lab")
    with _running_lab(base, serving_profile_yaml(serve_cluster)) as server:
        yield server


def _stop_server(server: Lab, proc: subprocess.Popen[bytes]) -> None:
    """Shut the server down through its API (it stops its kernels), then by signal if needed."""
    if proc.poll() is None:
        try:
            server.api("/api/shutdown", method="POST")
        except (OSError, urllib.error.URLError):
            proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: the server and its kernels
            proc.wait(timeout=10)


def _cancel_leftover_jobs(config: Path, registry: Path, keep: Collection[str] = ()) -> None:
    """Leave no job of these tests running on the shared test cluster (but those in ``keep``)."""
    if not registry.exists():
        return
    old = os.environ.get("JUPYTER_TIERS_CONFIG")
    os.environ["JUPYTER_TIERS_CONFIG"] = str(config)
    try:
        tier = SlurmTier(load_config().profile("box"), Registry(registry))
    finally:
        if old is None:
            os.environ.pop("JUPYTER_TIERS_CONFIG", None)
        else:
            os.environ["JUPYTER_TIERS_CONFIG"] = old
    try:
        for rec in tier.registry.list(limit=1000):
            if rec.job_id not in keep:
                tier.cancel(rec)  # the registry's state may lag behind: cancel is harmless on ended jobs
    finally:
        tier.close()


@pytest.fixture
def box_tier(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> Iterator[SlurmTier]:
    """The ``box`` tier on the lab server's registry: to ask the cluster what it thinks."""
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(lab.config))
    tier = SlurmTier(load_config().profile("box"), Registry(lab.registry))
    yield tier
    tier.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    _require_browser_tools()
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        _missing("playwright is not installed (pip install -e '.[test]')")
    # An expect() without its own timeout waits as long as any UI step may take (Playwright's
    # default is 5 s, too short for a notebook opening on a loaded machine).
    expect.set_options(timeout=UI_TIMEOUT_MS)
    pw = sync_playwright().start()
    try:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()
    finally:
        pw.stop()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh browser context and page; a failing test leaves a screenshot in test-output/."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000}, device_scale_factor=1)
    context.set_default_timeout(UI_TIMEOUT_MS)
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    pg = context.new_page()
    dialogs: list[str] = []
    pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    pg.jt_dialogs = dialogs  # type: ignore[attr-defined]
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.jt_errors = errors  # type: ignore[attr-defined]
    yield pg
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        OUTPUT.mkdir(exist_ok=True)
        try:
            pg.screenshot(path=str(OUTPUT / f"failed-{request.node.name}.png"), full_page=True)
        except Exception as exc:  # the failure itself matters more than its screenshot
            print(f"could not take the failure screenshot: {exc}", file=sys.stderr)
    context.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    rep = yield
    if rep.when == "call":
        item.rep_call = rep  # type: ignore[attr-defined]
    return rep
