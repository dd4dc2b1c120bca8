"""Issue 26 §3 on the local tier and a real S3 API server (moto): what a job leaves in its
checkpoint directory cannot make the uploader send files from outside it. A symlink
``latest -> ~/secrets`` written last is not "the newest checkpoint" by its own mtime, and inside
a directory checkpoint a link that resolves outside it (``stolen -> ~/.ssh/id_rsa``) is skipped,
while a link to a file of the checkpoint itself still travels as a copy."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.model import JobState
from jupyter_tiers.data.objectstore import MANIFEST_NAME, parse_manifest
from jupyter_tiers.local.tier import LocalTier
from tests.local.test_local_tier import FAST
from tests.s3.conftest import S3Server, aws_env, s3_server  # noqa: F401 - fixtures

pytestmark = [pytest.mark.s3, pytest.mark.usefixtures("aws_env")]
GUARD = 180.0  # bounds the wait so that a broken tier fails instead of hanging; nothing is timed

TRAIN = """\
import os, pathlib
d = pathlib.Path(os.environ["JT_CHECKPOINT_DIR"])
if os.environ["RANK"] == "0":
    ckpt = d / "ckpt-000100"
    ckpt.mkdir()
    (ckpt / "weights.bin").write_bytes(b"w" * 100)
    os.symlink("weights.bin", ckpt / "alias.bin")           # inside: sent as a copy
    os.symlink(SECRET_FILE, ckpt / "stolen")                 # outside: skipped
    os.symlink(SECRET_DIR, ckpt / "stolen-dir")              # a directory outside: skipped
    os.utime(ckpt, (1000, 1000))
    os.symlink(SECRET_DIR, d / "latest")                     # written last: newest by its own mtime
"""


@pytest.fixture
def tier(tmp_path: Path) -> Iterator[LocalTier]:
    made: list[LocalTier] = []

    def make(**settings: object) -> LocalTier:
        settings = {"workdir": str(tmp_path / "jobs"), **settings}
        profile = Profile(name="local", tier="local", settings=settings)
        t = LocalTier(profile, Registry(tmp_path / "r.sqlite"), watcher_options=FAST)
        made.append(t)
        return t

    yield make  # type: ignore[misc]
    for t in made:
        for rec in t.registry.list(limit=100):
            t.cancel(rec)
        t.close()


def test_symlinks_never_carry_files_from_outside_the_checkpoint(
        s3_server: S3Server, tmp_path: Path, tier: object) -> None:  # noqa: F811
    secrets = tmp_path / "home" / "secrets"
    secrets.mkdir(parents=True)
    (secrets / "id_rsa").write_text("PRIVATE KEY")
    bucket = s3_server.bucket()
    local = tier(object_store={**s3_server.endpoint_settings, "bucket": bucket})  # type: ignore[operator]
    body = TRAIN.replace("SECRET_FILE", repr(str(secrets / "id_rsa")))
    body = body.replace("SECRET_DIR", repr(str(secrets)))
    job = local.submit(local.make_spec(body, name="links", checkpoint_to="store"))
    status = job.wait(timeout=GUARD)
    assert status.state is JobState.COMPLETED, job.logs()
    report = local.upload_checkpoint(local.registry.get(job.key))
    assert report.error is None, report
    client = s3_server.client()
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", []))
    base = f"links/{job.id}/"
    assert keys == [base + MANIFEST_NAME, base + "ckpt-000100/alias.bin", base + "ckpt-000100/weights.bin"]
    manifest = parse_manifest(client.get_object(Bucket=bucket, Key=base + MANIFEST_NAME)["Body"].read())
    assert manifest.uri == f"s3://{bucket}/{base}ckpt-000100/"
    assert sorted(f.path for f in manifest.files) == ["alias.bin", "weights.bin"]
    for key in keys:
        assert b"PRIVATE KEY" not in client.get_object(Bucket=bucket, Key=key)["Body"].read()
