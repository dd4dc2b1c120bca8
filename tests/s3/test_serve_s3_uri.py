"""``%%k8s_serve --model-from s3://...`` on the Kubernetes emulator with moto's S3 server, no
Slurm: an object trained elsewhere is served through the init container; a missing key is
refused from the kernel before anything is created when the kernel has AWS credentials (and
``--dry-run`` says how it was checked), and without them the check is skipped (``--dry-run``
says so) and the init container's failure is one line naming the URI and the Secret, in the pod
row, the summary and the widget's pod table. Waits are bounded only so that a broken setup fails
instead of hanging."""

from __future__ import annotations

import contextlib
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_tiers import api
from jupyter_tiers.app.viewstate.serve import pod_rows
from jupyter_tiers.config import profiles as config
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.serving.status import describe_pod_problem
from tests.handoff.conftest import weights_server
from tests.helpers import ipython_test_shell
from tests.k8s_emulator.emulator import Emulator
from tests.s3.conftest import ACCESS_KEY, SECRET_KEY, S3Server

pytestmark = [pytest.mark.s3, pytest.mark.k8s_emulator, pytest.mark.usefixtures("aws_env")]
SERVE_FILE = weights_server("127.0.0.1", "PORT")
GUARD = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def ip() -> InteractiveShell:
    shell = ipython_test_shell()
    shell.run_line_magic("load_ext", "jupyter_tiers")
    return shell


@pytest.fixture
def serving(emulator_host_net: Emulator, s3_server: S3Server, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A Kubernetes profile ``serving`` on the emulator: object_store with credentials_secret
    s3-creds (moto's keys) and no model volume."""
    bucket = s3_server.bucket()
    namespace = f"s3u-{bucket[3:]}"
    emulator_host_net.create_namespace(namespace)
    emulator_host_net.store.create("secrets", {
        "metadata": {"name": "s3-creds", "namespace": namespace}, "type": "Opaque",
        "stringData": {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}})
    profiles = {"serving": {"tier": "kubernetes", "kubeconfig": str(emulator_host_net.kubeconfig_path),
                            "namespace": namespace, "request_timeout": 10,
                            "defaults": {"image": "python:3.11-slim"},
                            "object_store": {**s3_server.endpoint_settings, "bucket": bucket,
                                             "credentials_secret": "s3-creds"}}}
    path = tmp_path / "tiers.yaml"
    path.write_text(yaml.safe_dump({"default_profile": "serving", "profiles": profiles}))
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
    emulator_host_net.delete_namespace(namespace)


def cell(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], line: str, body: str) -> str:
    capsys.readouterr()
    ip.run_cell_magic("k8s_serve", line, body)
    return capsys.readouterr().out


def refusal(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], line: str) -> str:
    capsys.readouterr()
    result = ip.run_cell(f"%%k8s_serve {line}\n{SERVE_FILE}")
    out = capsys.readouterr()
    assert isinstance(result.error_in_exec, UsageError), (result.error_in_exec, out.out)
    assert "Traceback" not in out.out + out.err
    return str(result.error_in_exec)


def test_an_s3_object_is_served_and_a_missing_key_is_refused_from_the_kernel_before_anything_is_made(
        serving: dict[str, Any], s3_server: S3Server, emulator_host_net: Emulator, ip: InteractiveShell,
        capsys: pytest.CaptureFixture[str]) -> None:
    bucket = serving["bucket"]
    s3_server.client().put_object(Bucket=bucket, Key="elsewhere/model.txt", Body=b"trained elsewhere")
    shown = cell(ip, capsys, f"--name direct --model-from s3://{bucket}/elsewhere/model.txt --dry-run",
                 SERVE_FILE)
    assert shown.startswith(f"# --model-from s3://{bucket}/elsewhere/model.txt found: 0.0 MB (checked "
                            f"from this kernel with its own AWS credentials at {s3_server.endpoint})"), shown
    port = free_port()
    out = cell(ip, capsys, f"--name direct --port {port} --wait "
               f"--model-from s3://{bucket}/elsewhere/model.txt", SERVE_FILE)
    assert " READY 1/1" in out, out
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as resp:
        assert resp.read() == b"trained elsewhere"

    for uri, says in (
            (f"s3://{bucket}/elsewhere/nope.txt", f"no object elsewhere/nope.txt in bucket {bucket}"),
            (f"s3://{bucket}/elsewhere/none/", f"no objects under that prefix in bucket {bucket}"),
            ("s3://jt-no-such-bucket/m.txt",
             f"bucket jt-no-such-bucket does not exist at {s3_server.endpoint}")):
        for dry in ("", " --dry-run"):
            message = refusal(ip, capsys, f"--name missing --model-from {uri}{dry}")
            assert message.startswith(f"--model-from {uri}: {says}") and "\n" not in message, message
            assert "checked from this kernel with its own AWS credentials" in message
    deployments = emulator_host_net.store.list("deployments", serving["namespace"])
    assert [d["metadata"]["name"] for d in deployments] == ["direct"]  # nothing made for "missing"


def test_without_kernel_credentials_the_init_containers_404_is_one_line_in_the_row_and_summary(
        serving: dict[str, Any], ip: InteractiveShell, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    bucket = serving["bucket"]
    uri = f"s3://{bucket}/elsewhere/nope.txt"
    shown = cell(ip, capsys, f"--name bad --model-from {uri} --dry-run", SERVE_FILE)
    assert shown.startswith(f"# --model-from {uri} not checked from this kernel (it has no AWS "
                            "credentials); the init container uses the Secret s3-creds\n"), shown
    cell(ip, capsys, f"--name bad --port {free_port()} --out bad --model-from {uri}", SERVE_FILE)
    svc = ip.user_ns["bad"]
    line = (f"init container fetch-model: {uri}: 404 Not Found — no such key in bucket {bucket} "
            "(or no such bucket)")
    deadline = time.monotonic() + GUARD
    while True:
        status = svc.status()
        pods = status.pods
        if pods and pods[0].reason == "CrashLoopBackOff" and pods[0].message:
            break
        assert time.monotonic() < deadline, pods
        time.sleep(0.5)
    assert pods[0].phase == "Pending" and pods[0].exit_code == 1
    assert pods[0].message == line
    assert describe_pod_problem(pods[0]).endswith(f": {line}")
    assert line in (status.reason or ""), status.reason  # the service's summary says it
    (row,) = pod_rows(status, time.time())
    assert row[6].startswith("CrashLoopBackOff (exit 1") and row[6].endswith(f": {line}")  # the widget's row


def put_dir_checkpoint(s3: S3Server, bucket: str) -> str:
    """A directory checkpoint with the manifest the uploader writes (canonical JSON) beside it."""
    import hashlib

    from jupyter_tiers.data.objectstore import MANIFEST_NAME, Manifest, ManifestFile

    files = {"config.json": b'{"w": 3}', "sub/model.bin": bytes(range(256)) * 8}
    client = s3.client()
    for rel, data in files.items():
        client.put_object(Bucket=bucket, Key=f"jt/ft/7/ckpt-000100/{rel}", Body=data)
    uri = f"s3://{bucket}/jt/ft/7/ckpt-000100/"
    listed = tuple(ManifestFile(rel, len(data), hashlib.sha256(data).hexdigest())
                   for rel, data in sorted(files.items()))
    manifest = Manifest(uri=uri, kind="dir", source="hpc/7 (ft)", files=listed)
    client.put_object(Bucket=bucket, Key=f"jt/ft/7/{MANIFEST_NAME}", Body=manifest.to_json().encode())
    return uri


SERVE_DIR = SERVE_FILE.replace('open(os.environ["JT_MODEL_PATH"])',
                               'open(os.path.join(os.environ["JT_MODEL_PATH"], "config.json"))')


def test_the_init_container_checks_every_file_against_the_manifest(
        serving: dict[str, Any], s3_server: S3Server, ip: InteractiveShell,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 26 §3: the init container verifies the manifest's sha256 of every file (it only
    copied before): an intact checkpoint is served; one whose object changed after the upload
    fails the pod's init with one line naming the file."""
    bucket = serving["bucket"]
    uri = put_dir_checkpoint(s3_server, bucket)
    port = free_port()
    out = cell(ip, capsys, f"--name intact --port {port} --wait --model-from {uri}", SERVE_DIR)
    assert " READY 1/1" in out, out
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as resp:
        assert resp.read() == b'{"w": 3}'
    # The same size, other bytes: only the sha256 tells.
    s3_server.client().put_object(Bucket=bucket, Key="jt/ft/7/ckpt-000100/sub/model.bin",
                                  Body=bytes(reversed(range(256))) * 8)
    cell(ip, capsys, f"--name tampered --port {free_port()} --out tampered --model-from {uri}", SERVE_DIR)
    svc = ip.user_ns["tampered"]
    deadline = time.monotonic() + GUARD
    while True:
        pods = svc.status().pods
        if pods and pods[0].reason == "CrashLoopBackOff" and pods[0].message:
            break
        assert time.monotonic() < deadline, pods
        time.sleep(0.5)
    assert pods[0].message == (f"init container fetch-model: {uri}: sub/model.bin does not match its "
                               "sha256 in the manifest"), pods[0].message
