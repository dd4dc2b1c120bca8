"""Issue 21 section 1, the object store on the real Slurm test cluster: a Slurm profile's
object-store check runs on the login node (where its uploads run), over SSH, with the kernel's
credentials on stdin only. One short test (tests/s3/test_doctor_store.py covers the failures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_tiers.config.profiles import load_config
from jupyter_tiers.doctor import run_doctor
from jupyter_tiers.doctor.model import Status
from jupyter_tiers.doctor.render import render_text
from tests.cluster.conftest import profile_yaml
from tests.s3.conftest import SECRET_KEY, S3Server

pytestmark = [pytest.mark.cluster, pytest.mark.s3, pytest.mark.usefixtures("aws_env")]


def test_the_check_runs_on_the_login_node(cluster_env: dict[str, str], s3_server: S3Server,
                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = s3_server.bucket()
    path = tmp_path / "tiers.yaml"
    path.write_text(profile_yaml(cluster_env) + (
        f"    object_store: {{{s3_server.endpoint_yaml}, bucket: {bucket}, prefix: jt,"
        " credentials: kernel}\n"))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    report = run_doctor(load_config(), ["box"])
    text = render_text(report)
    s3 = {c.name: c for c in report.profiles[0].checks if c.name.startswith("s3 ")}
    assert s3 and all(c.status is Status.OK for c in s3.values()), text
    assert "from the login node (" in s3["s3 endpoint"].detail
    assert SECRET_KEY not in text
    assert s3_server.client().list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
