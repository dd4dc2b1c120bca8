"""Shared fixtures, and the environment markers.

Every test that needs something outside the venv carries a marker naming it (see ENVIRONMENTS).
Nobody has to remember to add it: a test gets the marker of each fixture in its fixture closure
(FIXTURE_ENVIRONMENTS) and of the folder it lives in (FOLDER_ENVIRONMENTS); an explicit marker
works too. ``pytest --fast`` (``bash tests/run.sh --fast``) deselects every marked test: what is
left needs no root, no cluster, no network and starts no supervisor, server or browser.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.tools import sandbox
from tests import durations
from tests.helpers import loud_skip

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent

# marker -> what it needs (registered in pyproject.toml too, so --strict-markers knows them).
ENVIRONMENTS = {
    "slurm": "the Slurm-in-a-box test cluster and its sshds (tests/run.sh starts them as root)",
    "sshd": "a private OpenSSH sshd on loopback (tests/transport starts one)",
    "k8s_emulator": "the Kubernetes API emulator and its kubelet (tests/k8s_emulator)",
    "browser": "a real JupyterLab in headless Debian chromium",
    "local_procs": "local supervisors, servers, kernels or Jupyter processes the test starts",
    "s3": "moto's S3 API server (tests/s3/conftest.py starts it)",
}
# A test using one of these fixtures (directly or through another fixture) needs that environment.
# "folder/name" means the fixture ``name`` as defined in tests/folder/ (a conftest or a test module
# there), for names as generic as ``tier``.
FIXTURE_ENVIRONMENTS = {
    "cluster_env": "slurm",
    "sshd": "sshd",
    "private_sshd": "sshd",
    "emulator": "k8s_emulator",
    "bare": "k8s_emulator",
    "serve_cluster": "k8s_emulator",
    "k8s_emulator": "k8s_emulator",
    "browser": "browser",
    "page": "browser",
    "lab": "browser",
    "local_lab": "browser",
    "serve_lab": "browser",
    "jp_serverapp": "local_procs",
    "kernel_env": "local_procs",
    "isolated_local": "local_procs",
    "local/tier": "local_procs",
    "local/job": "local_procs",
    "local/workdir": "local_procs",
    "local/ip": "local_procs",
    "local_serve/tier": "local_procs",
    "local_serve/workdir": "local_procs",
    "hardening/tier": "local_procs",
    "server/local": "local_procs",
    "s3_server": "s3",
}
# Every test in these folders (under tests/) needs that environment.
FOLDER_ENVIRONMENTS = {
    "cluster": "slurm",
    "browser": "browser",
    "k8s": "k8s_emulator",
    "k8s_emulator_tests": "k8s_emulator",
    "s3": "s3",
    "examples": "local_procs",
    "chaos": "local_procs",
}
# The contract suites (tests/contract/) are in no folder above: each test runs once per backend of
# an interface, and each backend's param carries that backend's environment (None: the fake Slurm
# cluster of tests/contract/fake_slurm.py, which needs nothing, so those runs stay in --fast).
BACKEND_ENVIRONMENTS: dict[str, str | None] = {
    "batch/slurm": None,
    "batch/slurm_here": "slurm",
    "batch/local": "local_procs",
    "serve/kubernetes": "k8s_emulator",
    "serve/local": "local_procs",
}
# Older spellings: a test marked ``cluster`` needs the Slurm cluster.
ALIASES = {"cluster": "slurm"}
CLUSTER_DIR = Path(os.environ.get("JT_CLUSTER_DIR", "/var/lib/jupyter-tiers-cluster"))
CLUSTER_SCRIPT = ROOT / "jupyter_tiers" / "tools" / "sandbox" / "cluster.sh"


def read_cluster_env() -> dict[str, str] | None:
    path = CLUSTER_DIR / "cluster.env"
    return sandbox.read_cluster_env(path) if path.exists() else None


#: The lock the two lanes take around the shared Slurm cluster: shared by a ``slurm_beside`` test
#: (a cluster test in the lane beside the slurm lane), alone by a ``cluster_disruptive`` one (it
#: stops, restarts or reshapes the cluster), so none of them runs while the cluster is disturbed.
CLUSTER_LEASE = Path(os.environ.get("JT_CLUSTER_LEASE", "/tmp/jupyter-tiers-cluster-tests.lock"))


@contextlib.contextmanager
def cluster_lease(*, alone: bool) -> Iterator[None]:
    """Hold the cluster lease (``flock``: shared, or ``alone`` exclusive) for the block."""
    import fcntl

    fd = os.open(CLUSTER_LEASE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing it releases the lock


@pytest.fixture(autouse=True)
def _cluster_lease(request: pytest.FixtureRequest) -> Iterator[None]:
    """A ``slurm_beside`` test holds the cluster lease shared, a ``cluster_disruptive`` one alone
    (before its own function-scoped fixtures run: a reshape is one)."""
    node = request.node
    if node.get_closest_marker("cluster_disruptive") is not None:
        with cluster_lease(alone=True):
            yield
    elif node.get_closest_marker("slurm_beside") is not None:
        with cluster_lease(alone=False):
            yield
    else:
        yield


@pytest.fixture(autouse=True)
def _isolated_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own registry and no stray tiers.yaml."""
    monkeypatch.setenv("JUPYTER_TIERS_REGISTRY", str(tmp_path / "registry.sqlite"))


@pytest.fixture(scope="session")
def cluster_env() -> dict[str, str]:
    env = read_cluster_env()
    if env is None:
        reason = (
            f"Slurm test cluster not running ({CLUSTER_DIR}/cluster.env missing): "
            "start it with `bash tests/run.sh` (needs root and apt)"
        )
        loud_skip("cluster tests", reason)
    return env


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast", action="store_true",
        help="only the tests that need no outside environment (no marker of ENVIRONMENTS in "
             "tests/conftest.py): the inner loop, no root, cluster, server or browser",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With --fast, do not even import the folders whose every test needs an environment."""
    if config.getoption("fast") and collection_path.parent == TESTS:
        return collection_path.name in FOLDER_ENVIRONMENTS or None
    return None


def _fixture_keys(item: pytest.Item) -> Iterator[str]:
    """Each fixture of ``item``'s closure by name, and as "folder/name" when tests/folder/ defines it."""
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        yield name
        defs = info.name2fixturedefs.get(name) if info is not None else None
        module = (getattr(defs[-1].func, "__module__", None) or "") if defs else ""
        parts = module.split(".")
        if len(parts) > 2 and parts[0] == "tests":
            yield f"{parts[1]}/{name}"


def environments_of(item: pytest.Item) -> set[str]:
    """The environments ``item`` needs: its explicit markers, its fixtures' and its folder's."""
    found = {ALIASES.get(m.name, m.name) for m in item.iter_markers()} & set(ENVIRONMENTS)
    found |= {FIXTURE_ENVIRONMENTS[k] for k in _fixture_keys(item) if k in FIXTURE_ENVIRONMENTS}
    path = Path(str(item.path)).resolve()
    if TESTS in path.parents:
        folder = path.relative_to(TESTS).parts[0]
        if folder in FOLDER_ENVIRONMENTS:
            found.add(FOLDER_ENVIRONMENTS[folder])
    return found


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with the environments it needs (so ``-m`` can select on them); with
    ``--fast``, deselect every test that needs one."""
    fast, slow = [], []
    for item in items:
        needs = environments_of(item)
        for name in sorted(needs):
            item.add_marker(name)
        if "slurm" in needs:
            item.add_marker("cluster")
        (slow if needs else fast).append(item)
    if config.getoption("fast") and slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = fast


# --fast keeps its promise: a test left in it that starts a local supervisor, a Jupyter server or a
# kernel fails, naming the marker it lacks (quick helper processes such as bash, node or shellcheck
# are fine). Python's audit hooks see every process start, whichever module starts it.
_RUNNING: dict[str, pytest.Item | None] = {"item": None}
_LONG_LIVED_MODULES = ("jupyter_tiers.local", "ipykernel", "ipykernel_launcher", "jupyter", "jupyterlab",
                       "jupyter_server")


def _long_lived(argv: list[str]) -> bool:
    """``argv`` starts a supervisor (``python -m jupyter_tiers.local...``) or a Jupyter program."""
    if argv and Path(argv[0]).name.startswith("jupyter"):
        return True
    for word, module in itertools.pairwise(argv):
        if word == "-m" and any(module == m or module.startswith(m + ".") for m in _LONG_LIVED_MODULES):
            return True
    return False


def _audit(event: str, args: tuple[object, ...]) -> None:
    item = _RUNNING["item"]
    if item is None or event not in ("subprocess.Popen", "os.posix_spawn", "os.exec"):
        return
    raw = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else args[:1]
    argv = [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in raw]
    if _long_lived(argv):
        _RUNNING["item"] = None  # report once
        item.stash[_STARTED] = " ".join(argv)[:200]


_STARTED = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("fast"):
        sys.addaudithook(_audit)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    if not item.config.getoption("fast"):
        return (yield)
    _RUNNING["item"] = item
    try:
        result = yield
    finally:
        _RUNNING["item"] = None
    started = item.stash.get(_STARTED, None)
    if started is not None:
        pytest.fail(f"{item.nodeid} runs in --fast but started a local process ({started}): mark it "
                    "`@pytest.mark.local_procs`, or list the fixture that starts it in "
                    "FIXTURE_ENVIRONMENTS (tests/conftest.py)", pytrace=False)
    return result


# Where the time goes (tests/durations.py): every test's setup + call + teardown, written to
# $JT_DURATIONS_FILE (default test-output/durations.json) and printed by group at the end of a run
# over several groups.
_DURATIONS: dict[str, float] = {}
_STARTED_AT = time.monotonic()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _DURATIONS[report.nodeid] = _DURATIONS.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if not _DURATIONS:
        return
    path = Path(os.environ.get("JT_DURATIONS_FILE") or ROOT / "test-output" / "durations.json")
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(durations.to_json(_DURATIONS, time.monotonic() - _STARTED_AT))
    table = durations.group_table(_DURATIONS)
    if len(table) < 2:
        return
    terminalreporter.section(f"time by group (setup + call + teardown; {path.name})")
    for line in durations.format_table(table):
        terminalreporter.write_line(line)
