"""Issue 26, HIGH 3, against a real S3 API server (moto): the local model cache never writes
outside its entry. Without a manifest the cache path comes from the listed keys, so a public or
shared bucket holding ``m/../../../x`` or ``m//abs/path`` could write into ``~`` (.bashrc,
~/.ipython/profile_default/startup). Every listed key goes through the manifest's key check and
the resolved target must stay under the entry: such a listing is refused in one line and
nothing is written anywhere."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jupyter_tiers.data.model_cache import FetchError, fetch_model, plan_model
from jupyter_tiers.data.objectstore import parse_object_store
from tests.s3.conftest import S3Server, aws_env, s3_server  # noqa: F401 - fixtures

pytestmark = [pytest.mark.s3, pytest.mark.usefixtures("aws_env")]


def _files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("evil", ["m/../../../../../escaped.txt", "m//{home}/escaped.txt",
                                  "m/sub/../../../../../escaped.txt", "m/./escaped.txt"])
def test_a_listed_key_never_leaves_the_cache_entry(s3_server: S3Server, tmp_path: Path,  # noqa: F811
                                                   evil: str) -> None:
    home = tmp_path / "home"
    cache = home / "cache" / "deep" / "er"
    cache.mkdir(parents=True)
    bucket = s3_server.bucket()
    client = s3_server.client()
    key = evil.format(home=str(home).lstrip("/"))
    client.put_object(Bucket=bucket, Key="m/weights.bin", Body=b"weights")
    client.put_object(Bucket=bucket, Key=key, Body=b"echo owned >> ~/.bashrc")
    listed = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="m/")["Contents"]]
    assert key in listed, listed  # the server keeps the key as written: the attack is real here
    store = parse_object_store({"endpoint_url": s3_server.endpoint, "bucket": bucket,
                                "allow_insecure_endpoint": True}, "local")
    for call in (plan_model, fetch_model):
        with pytest.raises(FetchError) as err:
            call(f"s3://{bucket}/m/", store, cache)
        message = str(err.value)
        assert "\n" not in message and "is not a safe path" in message, message
        assert "no empty, '.' or '..' segments" in message, message
    assert _files_under(home) == set(), "nothing may be written, inside the cache or out"
    assert not (home / "escaped.txt").exists() and not os.path.exists("/escaped.txt")


def test_a_clean_listing_still_downloads(s3_server: S3Server, tmp_path: Path) -> None:  # noqa: F811
    bucket = s3_server.bucket()
    client = s3_server.client()
    client.put_object(Bucket=bucket, Key="m/weights.bin", Body=b"weights")
    client.put_object(Bucket=bucket, Key="m/sub/config.json", Body=b"{}")
    store = parse_object_store({"endpoint_url": s3_server.endpoint, "bucket": bucket,
                                "allow_insecure_endpoint": True}, "local")
    path, downloaded = fetch_model(f"s3://{bucket}/m/", store, tmp_path)
    assert downloaded and (path / "sub" / "config.json").read_bytes() == b"{}"
    assert path.resolve().is_relative_to(tmp_path.resolve())
