"""A real S3 API server for the object-storage tests: moto's standalone server (``python -m
moto.server``), one per test session on a free loopback port, started only when a test asks for
it. moto is an emulator: it accepts any access key and secret (no IAM unless its IAM mode is on),
so only a missing bucket or key can be refused for real here; see README "Object storage"."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.data.objectstore import DEFAULT_FETCH_IMAGE
from tests.k8s_emulator.emulator import Emulator

#: Any credentials work on moto; these are what the tests' kernels and login node "have".
ACCESS_KEY, SECRET_KEY = "jt-test-key", "jt-test-secret"


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    log: Path

    def client(self):  # type: ignore[no-untyped-def]  # boto3 has no stubs here
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)

    @property
    def endpoint_settings(self) -> dict[str, Any]:
        """An object_store's endpoint keys for this server: plain http on loopback, so the
        profile opts in (``allow_insecure_endpoint``) as any http:// store must."""
        return {"endpoint_url": self.endpoint, "allow_insecure_endpoint": True}

    @property
    def endpoint_yaml(self) -> str:
        """The same keys inside a YAML flow mapping (``{...}``)."""
        return f"endpoint_url: '{self.endpoint}', allow_insecure_endpoint: true"

    def bucket(self) -> str:
        """A new empty bucket."""
        name = f"jt-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto's S3 server on loopback, answering before the first test uses it."""
    port = _free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120  # generous: a busy machine imports moto slowly
    try:
        while True:
            try:
                urllib.request.urlopen(endpoint + "/", timeout=5).close()
                break
            except urllib.error.HTTPError:
                break  # it answered
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.2)
        yield S3Server(endpoint, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel's AWS_* credentials (what credentials: kernel sends), none from ~/.aws."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)


@pytest.fixture(scope="module")
def emulator_host_net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    """The Kubernetes emulator with pods on the host network (so that they reach moto on
    loopback) and the fetch image's ``aws`` being the host's AWS CLI."""
    images = {"python:3.11-slim", "jupyter-tiers/test:latest", DEFAULT_FETCH_IMAGE}
    emu = Emulator(tmp_path_factory.mktemp("k8s-emulator-s3"),
                   kubelet_options={"images": images, "pod_netns": False, "backoff_base": 1.0})
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()
