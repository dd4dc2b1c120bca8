"""Fixtures of the local serving tests: a LocalServeTier on a workdir under tmp_path, with real
supervisor and replica processes (nothing mocked), and a teardown that deletes every service the
test left and checks in /proc that no process of it remains."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers.config.registry import Registry
from jupyter_tiers.local import serve_supervisor as ssv
from jupyter_tiers.local.serve_tier import LocalServeTier
from tests.helpers import local_profile, processes_mentioning, wait_for

GUARD = 120.0  # seconds; bounds every wait so a broken tier fails instead of hanging

# A replica that answers every GET with its own name (so round-robin is visible), and /health.
HTTP_BODY = '''\
import http.server, os
NAME = os.environ["JT_REPLICA"]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = NAME.encode()
        self.send_response(200 if self.path in ("/", "/health") else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
print("listening on", os.environ["PORT"], flush=True)
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
'''
CRASH_BODY = "import sys\nprint('about to fail', flush=True)\nsys.exit(3)\n"


def service_processes(root: Path | str) -> list[tuple[int, str]]:
    """Every live process whose command line or environment mentions ``root`` (a zombie is not
    running: its parent reaps it)."""
    return processes_mentioning(root, skip_zombies=True)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path / "work"


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    return Registry(tmp_path / "registry.sqlite")


@pytest.fixture
def tier(workdir: Path, registry: Registry) -> Iterator[LocalServeTier]:
    tier = LocalServeTier(local_profile(workdir), registry, poll_interval=0.1)
    yield tier
    tier.close()
    stop_everything(workdir, registry)


def stop_everything(workdir: Path, registry: Registry) -> None:
    """Delete every service under ``workdir`` and check that no process of them is left."""
    services = workdir / "services"
    cleaner = LocalServeTier(local_profile(workdir), registry)
    for rec in registry.list(limit=1000):
        if rec.kind == "service" and Path(rec.jobdir).parent == services:
            cleaner.delete(rec)
    if services.exists():
        for svcdir in services.iterdir():  # a supervisor of a service the registry lost
            state = ssv.read_json(svcdir / ssv.STATE_FILE) or {}
            if state.get("pid"):
                with contextlib.suppress(OSError):
                    os.kill(int(state["pid"]), 15)
    left: list[tuple[int, str]] = []

    def none_left() -> bool:
        left[:] = service_processes(workdir)
        return not left

    wait_for(none_left, "every process of the test's services to end")
    assert not left, left


@pytest.fixture(scope="session", autouse=True)
def _no_service_left(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """After the session, no local service of these tests may still run (a test that forgot to
    delete one leaves a detached supervisor behind): stop any and fail, naming them."""
    yield
    base = tmp_path_factory.getbasetemp()
    left = [(pid, cmd) for pid, cmd in service_processes(base) if "serve_supervisor" in cmd]
    for pid, _ in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    assert not left, f"local services left running by these tests: {left}"
