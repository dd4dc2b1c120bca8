"""Issue 21 section 1, the object store: ``doctor`` on a profile with ``object_store`` against
moto's S3 server. All OK with a test object written, read back and deleted (none left); a
missing bucket, wrong credentials (moto's IAM check switched on for that test only), an
unreachable endpoint and a kernel without credentials are one FAIL line each with the fix; no
credential value is ever printed."""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from jupyter_tiers.config.profiles import load_config
from jupyter_tiers.doctor import run_doctor
from jupyter_tiers.doctor.model import Check, Status
from jupyter_tiers.doctor.render import render_json, render_text
from tests.s3.conftest import ACCESS_KEY, SECRET_KEY, S3Server

S3_NAMES = ["s3 client", "s3 credentials", "s3 endpoint", "s3 bucket", "s3 write/read/delete"]


def _doctor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            store: dict[str, Any]) -> tuple[dict[str, Check], str]:
    path = tmp_path / "tiers.yaml"
    path.write_text(yaml.safe_dump({"profiles": {"lab": {
        "tier": "local", "workdir": str(tmp_path / "jobs"), "defaults": {"python": sys.executable},
        "object_store": store}}}))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    report = run_doctor(load_config(), ["lab"])
    text = render_text(report)
    assert SECRET_KEY not in text and SECRET_KEY not in render_json(report)
    return {c.name: c for c in report.profiles[0].checks if c.name.startswith("s3")}, text


def test_a_working_store_is_all_ok_and_leaves_nothing(s3_server: S3Server, aws_env: None, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = s3_server.bucket()
    checks, text = _doctor(tmp_path, monkeypatch, {**s3_server.endpoint_settings, "bucket": bucket,
                                                  "prefix": "team/ckpt", "credentials": "kernel"})
    assert list(checks) == S3_NAMES, text
    assert all(c.status is Status.OK for c in checks.values()), text
    assert "kernel: this notebook's AWS_ACCESS_KEY_ID" in checks["s3 credentials"].detail
    assert "(explicit)" in checks["s3 credentials"].detail  # handed over on stdin
    assert "s3://" + bucket + "/team/ckpt/ was written, read back and deleted" in checks[
        "s3 write/read/delete"].detail
    assert s3_server.client().list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
    # credentials: cluster: boto3's own chain where uploads run (here: this machine's AWS_*).
    checks, text = _doctor(tmp_path, monkeypatch, {**s3_server.endpoint_settings, "bucket": bucket})
    assert all(c.status is Status.OK for c in checks.values()), text
    detail = checks["s3 credentials"].detail
    assert detail.startswith("cluster: boto3's own chain on this machine") and "(env)" in detail


def test_a_missing_bucket_is_one_fail_with_the_fix(s3_server: S3Server, aws_env: None, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    checks, text = _doctor(tmp_path, monkeypatch, {**s3_server.endpoint_settings,
                                                  "bucket": "jt-no-such-bucket", "credentials": "kernel"})
    failed = [c for c in checks.values() if c.status is Status.FAIL]
    assert [c.name for c in failed] == ["s3 bucket"], text
    assert f"bucket jt-no-such-bucket does not exist at {s3_server.endpoint}" in failed[0].detail
    assert f"aws s3 mb s3://jt-no-such-bucket --endpoint-url {s3_server.endpoint}" in failed[0].fix
    assert checks["s3 write/read/delete"].status is Status.SKIP


@contextlib.contextmanager
def _auth_on(s3_server: S3Server) -> Iterator[None]:
    """moto's IAM check of access keys, on for one test (no key is known to it, so every key
    is refused as S3 refuses an unknown one); off again afterwards for the other tests."""

    def reset_auth(count: str) -> None:
        req = urllib.request.Request(f"{s3_server.endpoint}/moto-api/reset-auth", data=count.encode(),
                                     method="POST", headers={"Content-Type": "text/plain"})
        with urllib.request.urlopen(req, timeout=30) as answer:
            json.loads(answer.read())

    reset_auth("0")
    try:
        yield
    finally:
        reset_auth("inf")


def test_wrong_credentials_are_one_fail_with_the_fix(s3_server: S3Server, aws_env: None, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = s3_server.bucket()
    store = {**s3_server.endpoint_settings, "bucket": bucket, "credentials": "kernel"}
    with _auth_on(s3_server):
        checks, text = _doctor(tmp_path, monkeypatch, store)
    failed = [c for c in checks.values() if c.status is Status.FAIL]
    assert [c.name for c in failed] == ["s3 bucket"], text
    assert f"{s3_server.endpoint} refused the credentials (kernel): InvalidAccessKeyId" in failed[0].detail
    assert "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in failed[0].fix
    assert ACCESS_KEY not in text


def test_an_unreachable_endpoint_and_a_kernel_without_credentials(
        s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    checks, text = _doctor(tmp_path, monkeypatch, {**s3_server.endpoint_settings, "bucket": "jt-x1",
                                                  "credentials": "kernel"})
    failed = [c for c in checks.values() if c.status is Status.FAIL]
    assert [c.name for c in failed] == ["s3 credentials"], text
    assert "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set in the kernel's environment" in \
        failed[0].detail and "not in the notebook" in failed[0].fix
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    with socket.socket() as sock:  # a loopback port nothing listens on (bound, never listening)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        checks, text = _doctor(tmp_path, monkeypatch, {"endpoint_url": f"http://127.0.0.1:{port}",
                                                      "allow_insecure_endpoint": True,
                                                      "bucket": "jt-x1", "credentials": "kernel"})
    failed = [c for c in checks.values() if c.status is Status.FAIL]
    assert [c.name for c in failed] == ["s3 endpoint"], text
    assert f"127.0.0.1:{port} not reachable from this machine" in failed[0].detail
    assert "object_store.endpoint_url" in failed[0].fix
