"""Fixtures of the serving tier's integration tests: one Kubernetes emulator for the session (fast
kubelet: short crash back-off and probe periods), a fresh namespace per test, an isolated
registry, data dir and tiers.yaml, and a K8sTier on the emulator.

Every wait is bounded (GUARD) only so that a broken tier fails instead of hanging; nothing
asserts on time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from jupyter_tiers import api
from jupyter_tiers.config import profiles as config
from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.core.model import ServiceStatus
from jupyter_tiers.k8s.tier import K8sTier
from tests.k8s_emulator.emulator import Emulator
from tests.k8s_emulator.fixtures import k8s_namespace  # noqa: F401

GUARD = 120.0  # seconds; bounds every wait
IMAGE = "python:3.11-slim"
PROFILE = "serving"

T = TypeVar("T")

# A server that answers GET / with its pod name (and /healthz), printing one line first.
SERVER = """\
import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers()
        self.wfile.write(("hello from " + os.environ.get("HOSTNAME", "?")).encode())
    def log_message(self, *args):
        pass
print("serving on", os.environ["JT_PORT"], flush=True)
http.server.ThreadingHTTPServer(("0.0.0.0", int(os.environ["JT_PORT"])), H).serve_forever()
"""


@pytest.fixture(scope="session")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    """The emulator of tests/k8s (overrides the default one): crash back-off from 1 s, probes
    four times faster than their periods say, HPA resync every second."""
    emu = Emulator(
        tmp_path_factory.mktemp("k8s-serve-emulator"),
        kubelet_options={"backoff_base": 1.0, "probe_period": 0.25},
        controller_options={"hpa_sync": 1.0},
    )
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


def profile_settings(emulator: Emulator, namespace: str, kubeconfig: Path | None = None) -> dict[str, Any]:
    return {"kubeconfig": str(kubeconfig or emulator.kubeconfig_path), "namespace": namespace,
            "request_timeout": 10}


def write_tiers_yaml(path: Path, profiles: dict[str, dict[str, Any]], default: str = PROFILE) -> Path:
    path.write_text(yaml.safe_dump({"default_profile": default, "profiles": profiles}, sort_keys=False))
    return path


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, emulator: Emulator,
             k8s_namespace: str) -> Iterator[Path]:  # noqa: F811
    """No system/user tiers.yaml; a project tiers.yaml with profile ``serving`` (this test's
    namespace) and slurm profile ``far``; registry and data dir in tmp_path; cwd tmp_path; text
    display. Afterwards every cached tier is closed and no tier thread may be left running."""
    before = set(threading.enumerate())
    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "no-system-tiers.yaml")
    monkeypatch.setattr(config, "USER_PATH", tmp_path / "no-user-tiers.yaml")
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter-data"))
    monkeypatch.setenv("JUPYTER_TIERS_REGISTRY", str(tmp_path / "registry.sqlite"))
    monkeypatch.setenv("JUPYTER_TIERS_DISPLAY", "text")
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    path = write_tiers_yaml(tmp_path / "tiers.yaml", {
        PROFILE: {"tier": "kubernetes", **profile_settings(emulator, k8s_namespace),
                  "defaults": {"image": IMAGE}},
        "far": {"tier": "slurm", "host": "192.0.2.1", "user": "nobody", "connect_timeout": 1},
    })
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    monkeypatch.chdir(tmp_path)
    yield path
    api.close_all()
    leaked = wait_for(lambda: not _tier_threads(before) or None, 15.0, "", fail=False)
    if leaked is None:
        names = sorted(t.name for t in _tier_threads(before))
        pytest.fail(f"tier threads still running after close: {names}")


def _tier_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    return [t for t in threading.enumerate()
            if t not in before and t.is_alive() and t.name.startswith("jt-")]


@pytest.fixture
def profile(emulator: Emulator, k8s_namespace: str) -> Profile:  # noqa: F811
    return Profile(name=PROFILE, tier="kubernetes", settings=profile_settings(emulator, k8s_namespace),
                   defaults={"image": IMAGE}, sources=("test",))


@pytest.fixture
def tier(profile: Profile) -> Iterator[K8sTier]:
    t = K8sTier(profile)
    try:
        yield t
    finally:
        t.close()


def wait_for(cond: Callable[[], T | None], timeout: float = GUARD, what: str = "condition", *,
             fail: bool = True, interval: float = 0.1, show: Callable[[], Any] | None = None) -> T | None:
    """Poll ``cond`` until it returns something truthy (returned); fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            if fail:
                seen = show() if show is not None else value
                pytest.fail(f"gave up waiting for {what} after {timeout:.0f} s (last: {seen!r})")
            return None
        time.sleep(interval)


class StatusLog:
    """Every status a ``tier.watch`` delivered, for waiting on a condition."""

    def __init__(self) -> None:
        self.statuses: list[ServiceStatus] = []
        self.cv = threading.Condition()

    def __call__(self, status: ServiceStatus) -> None:
        with self.cv:
            self.statuses.append(status)
            self.cv.notify_all()

    @property
    def last(self) -> ServiceStatus | None:
        with self.cv:
            return self.statuses[-1] if self.statuses else None

    def wait(self, pred: Callable[[ServiceStatus], bool], timeout: float = GUARD,
             what: str = "status") -> ServiceStatus:
        deadline = time.monotonic() + timeout
        with self.cv:
            while True:
                for status in reversed(self.statuses):
                    if pred(status):
                        return status
                    break  # only the latest counts
                left = deadline - time.monotonic()
                if left <= 0:
                    last = self.statuses[-1] if self.statuses else None
                    pytest.fail(f"gave up waiting for {what} after {timeout:.0f} s; last status: {last}")
                self.cv.wait(min(left, 1.0))
