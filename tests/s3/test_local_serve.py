"""The local serving tier's model from the object store: downloaded into a cache keyed by the
upload's manifest (or by the objects' keys, sizes and ETags), so that a re-run downloads nothing;
and ``%%k8s_serve --model-from s3://...`` on a local profile answering with it."""

from __future__ import annotations

import contextlib
import json
import textwrap
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_tiers import api
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.data.model_cache import FetchError, fetch_model
from jupyter_tiers.data.objectstore import MANIFEST_FORMAT, MANIFEST_NAME, parse_object_store
from tests.handoff.conftest import weights_server
from tests.helpers import isolate_tiers, tiers_shell
from tests.s3.conftest import S3Server

pytestmark = [pytest.mark.s3, pytest.mark.usefixtures("aws_env")]


def put_checkpoint(s3: S3Server, bucket: str) -> str:
    """A directory checkpoint with its manifest, as --checkpoint-to leaves it."""
    import hashlib

    client = s3.client()
    files = {"config.json": b'{"w": 3}', "sub/model.bin": bytes(range(256)) * 64}
    for rel, body in files.items():
        client.put_object(Bucket=bucket, Key=f"jt/ft/7/ckpt-000100/{rel}", Body=body)
    uri = f"s3://{bucket}/jt/ft/7/ckpt-000100/"
    manifest = {"format": MANIFEST_FORMAT, "uri": uri, "kind": "dir", "source": "hpc/7 (ft)",
                "files": [{"path": k, "size": len(v), "sha256": hashlib.sha256(v).hexdigest()}
                          for k, v in sorted(files.items())]}
    client.put_object(Bucket=bucket, Key=f"jt/ft/7/{MANIFEST_NAME}", Body=json.dumps(manifest).encode())
    return uri


def test_an_uploaded_checkpoint_is_downloaded_once_and_checked_against_its_manifest(
        s3_server: S3Server, tmp_path: Path) -> None:
    bucket = s3_server.bucket()
    uri = put_checkpoint(s3_server, bucket)
    store = parse_object_store({**s3_server.endpoint_settings, "bucket": bucket}, "local")
    path, downloaded = fetch_model(uri, store, tmp_path / "cache")
    assert downloaded and path.name == "ckpt-000100"
    assert (path / "config.json").read_bytes() == b'{"w": 3}'
    assert (path / "sub" / "model.bin").read_bytes() == bytes(range(256)) * 64
    again, downloaded = fetch_model(uri, store, tmp_path / "cache")
    assert (again, downloaded) == (path, False)
    # A changed object no longer matches the manifest's sha256: refused in one line.
    s3_server.client().put_object(Bucket=bucket, Key="jt/ft/7/ckpt-000100/config.json", Body=b'{"w": 4}')
    import shutil

    shutil.rmtree(tmp_path / "cache")
    with pytest.raises(FetchError, match=r"config\.json does not match its sha256 in the manifest"):
        fetch_model(uri, store, tmp_path / "cache")


def test_any_object_or_prefix_is_cached_by_its_listing_and_missing_ones_are_one_line(
        s3_server: S3Server, tmp_path: Path) -> None:
    bucket = s3_server.bucket()
    client = s3_server.client()
    client.put_object(Bucket=bucket, Key="m/a.txt", Body=b"a")
    client.put_object(Bucket=bucket, Key="m/b/c.txt", Body=b"c")
    store = parse_object_store({**s3_server.endpoint_settings, "bucket": bucket}, "local")
    path, downloaded = fetch_model(f"s3://{bucket}/m/", store, tmp_path)
    assert downloaded and (path / "b" / "c.txt").read_bytes() == b"c"
    assert fetch_model(f"s3://{bucket}/m/", store, tmp_path) == (path, False)
    single, _ = fetch_model(f"s3://{bucket}/m/a.txt", store, tmp_path)
    assert single.read_bytes() == b"a" and single.name == "a.txt"
    client.put_object(Bucket=bucket, Key="m/a.txt", Body=b"changed")  # a new ETag: a new entry
    changed, downloaded = fetch_model(f"s3://{bucket}/m/a.txt", store, tmp_path)
    assert downloaded and changed != single and changed.read_bytes() == b"changed"
    for uri, says in ((f"s3://{bucket}/m/nope.txt", f"no object s3://{bucket}/m/nope.txt"),
                      (f"s3://{bucket}/none/", "no objects under that prefix"),
                      ("s3://jt-no-such-bucket/m/a.txt", "")):
        with pytest.raises(FetchError) as err:
            fetch_model(uri, store, tmp_path)
        assert says in str(err.value) and "\n" not in str(err.value)


@pytest.fixture
def local_store(s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    isolate_tiers(tmp_path, monkeypatch)
    bucket = s3_server.bucket()
    path = tmp_path / "tiers.yaml"
    path.write_text(textwrap.dedent(f"""\
        profiles:
          loc:
            tier: local
            workdir: {tmp_path / "jobs"}
            object_store: {{{s3_server.endpoint_yaml}, bucket: {bucket}}}
        """))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    yield bucket
    for rec in Registry().list(limit=1000, kind="service"):
        with contextlib.suppress(Exception):
            api.connect(rec.profile, kind="serve").delete(rec)  # type: ignore[attr-defined]


SERVE = weights_server("127.0.0.1", "PORT")


def test_local_serving_from_an_s3_uri_downloads_once(local_store: str, s3_server: S3Server,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    ip: InteractiveShell = tiers_shell()
    s3_server.client().put_object(Bucket=local_store, Key="m/model.txt", Body=b"served from s3")
    capsys.readouterr()
    # --dry-run downloads nothing: it says what would be fetched, and where to.
    ip.run_cell_magic("k8s_serve", f"--profile loc --name s3loc --model-from s3://{local_store}/m/model.txt "
                      "--dry-run", SERVE)
    out = capsys.readouterr().out
    assert f"# model s3://{local_store}/m/model.txt would be downloaded to " in out, out
    assert ": 1 file, 0.0 MB" in out
    cache = Path(out.split(" would be downloaded to ", 1)[1].split(":", 1)[0])
    assert not cache.parent.exists()
    ip.run_cell_magic("k8s_serve", f"--profile loc --name s3loc --model-from s3://{local_store}/m/model.txt "
                      "--wait --out svc", SERVE)
    out = capsys.readouterr().out
    assert f"model s3://{local_store}/m/model.txt downloaded to " in out and "READY" in out, out
    with urllib.request.urlopen(ip.user_ns["svc"].url, timeout=30) as resp:
        assert resp.read() == b"served from s3"
    ip.run_cell_magic("k8s_serve", f"--profile loc --name s3loc --model-from s3://{local_store}/m/model.txt "
                      "--dry-run", SERVE)
    assert f"# model s3://{local_store}/m/model.txt is cached at {cache} (nothing to download)" in \
        capsys.readouterr().out
    result = ip.run_cell(f"%%k8s_serve --profile loc --name x --model-from s3://{local_store}/m/nope\n{SERVE}")
    assert isinstance(result.error_in_exec, UsageError)
    assert f"no object s3://{local_store}/m/nope" in str(result.error_in_exec)


def test_the_kernel_check_is_skipped_with_a_reason_when_the_endpoint_is_unreachable() -> None:
    """``--model-from s3://`` on Kubernetes: kernel credentials, but an endpoint only the cluster
    reaches (here a loopback port nobody listens on): not checked, and the line says why."""
    import socket

    from jupyter_tiers.data.model_cache import check_model

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    store = parse_object_store({"endpoint_url": f"http://127.0.0.1:{port}", "allow_insecure_endpoint": True,
                                "bucket": "team-ckpt",
                                "credentials_secret": "s3-creds"}, "kubernetes")
    check = check_model("s3://team-ckpt/m/model.bin", store)
    assert not check.checked
    assert check.line == (f"s3://team-ckpt/m/model.bin not checked from this kernel (this kernel cannot "
                          f"reach http://127.0.0.1:{port}); the init container uses the Secret s3-creds")
