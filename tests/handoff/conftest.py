"""The handoff tests take the Kubernetes emulator and the Slurm test cluster's ``box`` tier from
the fixtures the other test folders use (each started only when a test asks for it). TRAIN is the
training body both handoff tests (local tier, Slurm cluster) run; ``weights_server`` the model
server several of them serve; ``isolated_local`` the local-tier isolation they share."""

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers import api
from jupyter_tiers.config.registry import Registry
from tests.cluster.conftest import box, tiers_yaml  # noqa: F401
from tests.helpers import cancel_registered_jobs, isolate_tiers
from tests.k8s_emulator.fixtures import emulator, k8s_namespace  # noqa: F401

# Every rank reports whether JT_CHECKPOINT_DIR exists; rank 0 writes two checkpoints into it.
TRAIN = """\
import os, pathlib
d = os.environ["JT_CHECKPOINT_DIR"]
print("checkpoint dir", d, "exists" if os.path.isdir(d) else "missing", flush=True)
if os.environ["RANK"] == "0":
    for step in (50, 100):
        pathlib.Path(d, f"ckpt-{step:06d}.pt").write_text(f"weights of step {step}")
"""


def weights_server(bind: str, port_env: str, *, announce: bool = False) -> str:
    """A served body that reads the model at ``JT_MODEL_PATH`` once (as a model server loads
    weights) and answers every GET with it, listening on ``bind`` and the port in ``port_env``;
    ``announce`` prints the model's size when loaded."""
    loaded = 'print("loaded", len(weights), "bytes", flush=True)\n' if announce else ""
    return f"""\
import http.server, os
weights = open(os.environ["JT_MODEL_PATH"]).read()
{loaded}class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = weights.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("{bind}", int(os.environ["{port_env}"])), H).serve_forever()
"""


@pytest.fixture
def isolated_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Only the built-in local profile, jobs and services under tmp_path, text display; every
    service deleted and every job cancelled afterwards."""
    isolate_tiers(tmp_path, monkeypatch)
    yield
    for rec in Registry().list(limit=1000, kind="service"):
        with contextlib.suppress(Exception):
            api.connect(rec.profile, kind="serve").delete(rec)  # type: ignore[attr-defined]
    cancel_registered_jobs()
