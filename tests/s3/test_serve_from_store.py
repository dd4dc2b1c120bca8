"""Across two clusters that share nothing but an object store, for real: a job on the Slurm test
cluster saves a checkpoint, the watcher uploads it from the login node to moto's S3 server, and
``%%k8s_serve --model-from`` on a Kubernetes profile without a model volume serves it: the pods'
init container copies it from S3 into an emptyDir (the emulator runs init containers as golden
13a/13b show a real kubelet does; the fetch image's ``aws`` is the host's AWS CLI), and the
server answers with the weights. The emulator's pods use the host network here, so that they
reach moto on loopback. Waits are bounded only so that a broken setup fails instead of hanging."""

from __future__ import annotations

import contextlib
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_tiers import api
from jupyter_tiers.config import profiles as config
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.data.objectstore import DEFAULT_FETCH_IMAGE
from tests.cluster.conftest import profile_yaml
from tests.helpers import cancel_registered_jobs, ipython_test_shell, wait_for
from tests.k8s_emulator.emulator import Emulator
from tests.s3.conftest import ACCESS_KEY, SECRET_KEY, S3Server

# In the lane beside the slurm lane (tests/run.sh), sharing the cluster.
pytestmark = [pytest.mark.cluster, pytest.mark.s3, pytest.mark.usefixtures("aws_env"),
              pytest.mark.slurm_beside]

TRAIN = """\
import os, pathlib
d = pathlib.Path(os.environ["JT_CHECKPOINT_DIR"], "ckpt-000100")
if os.environ["RANK"] == "0":
    d.mkdir(parents=True)
    (d / "weights.txt").write_text("weights of step 100")
"""
SERVE = """\
import http.server, os
# JT_MODEL_PATH ({model_path}, /models/ckpt-000100): the emulator rewrites mount paths in env only.
weights = open(os.path.join(os.environ["JT_MODEL_PATH"], "weights.txt")).read()
print("loaded", weights, flush=True)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = weights.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
"""


@pytest.fixture(scope="module")
def ip() -> InteractiveShell:
    shell = ipython_test_shell()
    shell.run_line_magic("load_ext", "jupyter_tiers")
    return shell


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def clusters(cluster_env: dict[str, str], emulator_host_net: Emulator, s3_server: S3Server, tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """``box``: the Slurm cluster uploading to moto (kernel credentials); ``serving``: the
    emulator, object_store with credentials_secret s3-creds and no model volume."""
    bucket = s3_server.bucket()
    namespace = f"s3-{bucket[3:]}"
    emulator_host_net.create_namespace(namespace)
    emulator_host_net.store.create("secrets", {
        "metadata": {"name": "s3-creds", "namespace": namespace}, "type": "Opaque",
        "stringData": {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}})
    profiles = yaml.safe_load(profile_yaml(cluster_env))["profiles"]
    store = {**s3_server.endpoint_settings, "bucket": bucket, "prefix": "jt"}
    profiles["box"]["object_store"] = {**store, "credentials": "kernel"}
    profiles["serving"] = {"tier": "kubernetes", "kubeconfig": str(emulator_host_net.kubeconfig_path),
                           "namespace": namespace, "request_timeout": 10,
                           "defaults": {"image": "python:3.11-slim"},
                           "object_store": {**store, "credentials_secret": "s3-creds"}}
    profiles["serving-nostore"] = {k: v for k, v in profiles["serving"].items() if k != "object_store"}
    path = tmp_path / "tiers.yaml"
    path.write_text(yaml.safe_dump({"default_profile": "box", "profiles": profiles}))
    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "no-system-tiers.yaml")
    monkeypatch.setattr(config, "USER_PATH", tmp_path / "no-user-tiers.yaml")
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter-data"))
    monkeypatch.setenv("JUPYTER_TIERS_DISPLAY", "text")
    monkeypatch.chdir(tmp_path)
    yield {"bucket": bucket, "namespace": namespace}
    for rec in Registry().list(limit=1000, kind="service"):
        with contextlib.suppress(Exception):
            api.connect(rec.profile, kind="serve").delete(rec)  # type: ignore[attr-defined]
    cancel_registered_jobs()
    emulator_host_net.delete_namespace(namespace)


def cell(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], magic: str, line: str, body: str) -> str:
    capsys.readouterr()
    ip.run_cell_magic(magic, line, body)
    return capsys.readouterr().out


def test_slurm_checkpoint_uploaded_then_served_on_kubernetes_through_an_init_container(
        clusters: dict[str, Any], ip: InteractiveShell, capsys: pytest.CaptureFixture[str],
        emulator_host_net: Emulator) -> None:
    bucket = clusters["bucket"]
    out = cell(ip, capsys, "slurm_train", "--profile box --name s3ft --checkpoint-to store --wait --out job",
               TRAIN)
    job = ip.user_ns["job"]
    uri = f"s3://{bucket}/jt/s3ft/{job.id}/ckpt-000100/"
    assert out.rstrip().endswith(f"— checkpoint {uri}"), out

    shown = cell(ip, capsys, "k8s_serve", "--profile serving --name s3svc --model-from job --dry-run", SERVE)
    deployment = next(o for o in yaml.safe_load_all(shown) if o and o["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    assert init["image"] == DEFAULT_FETCH_IMAGE and uri in init["command"]
    assert {"name": "JT_MODEL_PATH", "value": "/models/ckpt-000100"} in pod["containers"][0]["env"]

    port = free_port()
    out = cell(ip, capsys, "k8s_serve",
               f"--profile serving --name s3svc --model-from job --port {port} --wait --out svc", SERVE)
    assert " READY 1/1" in out, out
    svc = ip.user_ns["svc"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as resp:
        assert resp.read().decode() == "weights of step 100"
    # The pod's log is copied by the kubelet as it goes: waited for, not read once.
    wait_for(lambda: "loaded weights of step 100" in svc.logs(), "the pod's 'loaded' line in its log",
             interval=0.5)
    # The init container checked the copy against the manifest the real uploader wrote (issue 26).
    chunks = emulator_host_net.kubelet.read_log(clusters["namespace"], svc.pods()[0].name,
                                                container="fetch-model")
    init_log = b"".join(chunks or []).decode()
    assert "jt-fetch: every file (1) matches the manifest's size and sha256" in init_log, init_log

    # A profile with neither a model volume nor an object store: one line naming both ways.
    capsys.readouterr()
    result = ip.run_cell(f"%%k8s_serve --profile serving-nostore --name x --model-from {job.id}\n{SERVE}")
    assert isinstance(result.error_in_exec, UsageError)
    assert f"--model-from: job {job.id} (s3ft): profile 'serving-nostore' has no model_volume" in str(
        result.error_in_exec)
