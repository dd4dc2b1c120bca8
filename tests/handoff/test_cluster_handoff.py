"""The handoff on the real Slurm test cluster (over the real sshd), then to the Kubernetes API
emulator: a job's ranks get JT_CHECKPOINT_DIR, its newest checkpoint is recorded from the status
round trip, and ``%%k8s_serve --model-from`` serves it through a hostPath model volume and a
path_map. Waits are bounded only so a broken tier fails instead of hanging."""

from __future__ import annotations

import contextlib
import re
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
from jupyter_tiers.batch.status import summary_line
from jupyter_tiers.config import profiles as config
from jupyter_tiers.config.profiles import load_config
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.model import JobState
from jupyter_tiers.data.handoff import decode_detail
from jupyter_tiers.slurm.tier import SlurmTier
from tests.cluster.conftest import profile_yaml
from tests.handoff.conftest import TRAIN, weights_server
from tests.helpers import cancel_registered_jobs, ipython_test_shell, wait_for

# In the lane beside the slurm lane (tests/run.sh), sharing the cluster.
pytestmark = [pytest.mark.cluster, pytest.mark.slurm_beside]

GUARD = 300.0
WORKDIR = "/var/lib/jupyter-tiers-jobs/box"  # the box profile's workdir (tests/cluster/conftest.py)

SERVE = weights_server("0.0.0.0", "JT_PORT", announce=True)


def counting(tier: SlurmTier) -> list[list[str]]:
    """Every argv the tier runs over SSH, recorded (the real transport still runs it)."""
    seen: list[list[str]] = []
    transport = tier.transport
    real = transport.run

    def run(argv: list[str], *args: Any, **kwargs: Any) -> Any:
        seen.append(list(argv))
        return real(argv, *args, **kwargs)

    transport.run = run  # type: ignore[method-assign,assignment]
    return seen


def test_every_rank_gets_the_dir_and_completion_records_the_newest_in_the_status_round_trip(
        box: SlurmTier) -> None:
    commands = counting(box)
    job = box.submit(box.make_spec(TRAIN, name="ckpt", nodes=2, ntasks_per_node=2))
    status = job.wait(timeout=GUARD)
    logs = job.logs()
    assert status.state is JobState.COMPLETED, logs
    rec = box.registry.get(job.key)
    directory, newest = decode_detail(rec.detail)
    assert directory == f"{Path(rec.jobdir).parent}/ckpt/{job.id}/checkpoints"
    assert newest == f"{directory}/ckpt-000100.pt"
    assert status.checkpoint == newest
    assert summary_line(status).endswith(f" — checkpoint {newest}")
    seen = sorted(re.findall(r"^(\d): checkpoint dir (\S+) (\w+)$", logs, re.M))
    assert seen == [(str(r), directory, "exists") for r in range(4)]
    # the listing rode on squeue's round trip: no command of its own
    listing = [argv for argv in commands if any(directory in a or "jt-status" in a for a in argv)]
    assert listing and all("squeue" in argv for argv in listing), listing


def test_checkpoint_dir_override_under_home(box: SlurmTier) -> None:
    spec = box.make_spec(TRAIN, name="home", checkpoint_dir="~/jt-ckpt-test/run1")
    job = box.submit(spec)
    status = job.wait(timeout=GUARD)
    assert status.state is JobState.COMPLETED, job.logs()
    home = box.transport.run(["sh", "-c", 'printf %s "$HOME"']).text()
    assert status.checkpoint == f"{home}/jt-ckpt-test/run1/ckpt-000100.pt"
    assert decode_detail(box.registry.get(job.key).detail) == (f"{home}/jt-ckpt-test/run1", status.checkpoint)
    box.transport.run(["rm", "-rf", "--", f"{home}/jt-ckpt-test"])


# --- Slurm -> Kubernetes -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ip() -> InteractiveShell:
    shell = ipython_test_shell()
    shell.run_line_magic("load_ext", "jupyter_tiers")
    return shell


@pytest.fixture
def both(cluster_env: dict[str, str], emulator: Any, k8s_namespace: str, tmp_path: Path,
         monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """tiers.yaml: slurm profile ``box``; kubernetes ``serving`` with a hostPath model volume
    whose path_map says where the cluster's workdir appears in it; ``bare`` without a volume;
    ``elsewhere`` whose path_map covers other storage."""
    profiles = yaml.safe_load(profile_yaml(cluster_env))["profiles"]
    k8s = {"tier": "kubernetes", "kubeconfig": str(emulator.kubeconfig_path), "namespace": k8s_namespace,
           "request_timeout": 10, "defaults": {"image": "python:3.11-slim"}}
    profiles["serving"] = {**k8s, "model_volume": {"host_path": WORKDIR, "path_map": {WORKDIR: "/"}}}
    profiles["bare"] = dict(k8s)
    profiles["elsewhere"] = {**k8s, "model_volume": {"host_path": WORKDIR, "path_map": {"/data": "/"}}}
    path = tmp_path / "tiers.yaml"
    path.write_text(yaml.safe_dump({"default_profile": "box", "profiles": profiles}))
    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "no-system-tiers.yaml")
    monkeypatch.setattr(config, "USER_PATH", tmp_path / "no-user-tiers.yaml")
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter-data"))
    monkeypatch.setenv("JUPYTER_TIERS_DISPLAY", "text")
    monkeypatch.chdir(tmp_path)
    yield path
    for rec in Registry().list(limit=1000, kind="service"):
        with contextlib.suppress(Exception):
            api.connect(rec.profile, kind="serve").delete(rec)  # type: ignore[attr-defined]
    cancel_registered_jobs()


def cell(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], magic: str, line: str, body: str) -> str:
    capsys.readouterr()
    ip.run_cell_magic(magic, line, body)
    return capsys.readouterr().out


def refusal(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], line: str) -> str:
    capsys.readouterr()
    result = ip.run_cell(f"%%k8s_serve {line}\n{SERVE}")
    captured = capsys.readouterr()
    assert isinstance(result.error_in_exec, UsageError), (result.error_in_exec, captured)
    assert "Traceback" not in captured.out + captured.err
    return str(result.error_in_exec)


def test_slurm_checkpoint_served_on_kubernetes_through_host_path_and_path_map(
        both: Path, ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    out = cell(ip, capsys, "slurm_train", "--profile box --name ft --nodes 2 --wait --out job", TRAIN)
    job = ip.user_ns["job"]
    newest = decode_detail(Registry().get(job.key).detail)[1]
    assert newest and newest.startswith(WORKDIR + "/") and out.rstrip().endswith(f"— checkpoint {newest}")
    inside = "/models" + newest[len(WORKDIR):]

    shown = cell(ip, capsys, "k8s_serve", "--profile serving --name ft-svc --model-from job --dry-run", SERVE)
    objects = {o["kind"]: o for o in yaml.safe_load_all(shown) if o}
    deployment = objects["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert {"name": "models", "hostPath": {"path": WORKDIR, "type": "Directory"}} in pod["volumes"]
    container = pod["containers"][0]
    assert {"name": "models", "mountPath": "/models", "readOnly": True} in container["volumeMounts"]
    assert {"name": "JT_MODEL_PATH", "value": inside} in container["env"]
    assert deployment["metadata"]["annotations"]["jupyter-tiers/model-from"] == f"box/{job.id} (ft)"

    out = cell(ip, capsys, "k8s_serve", "--profile serving --name ft-svc --model-from ft --wait --out svc",
               SERVE)
    assert "model from box/" in out and " READY 1/1" in out, out
    svc = ip.user_ns["svc"]
    url = svc.port_forward()
    with urllib.request.urlopen(url, timeout=30) as resp:
        assert resp.read().decode() == "weights of step 100"
    # The pod's log is copied by the kubelet as it goes: waited for, not read once.
    wait_for(lambda: "loaded 19 bytes" in svc.logs(), "the pod's 'loaded' line in its log", interval=0.5)
    assert Registry().get(svc.key).spec["model_source"] == f"box/{job.id} (ft)"

    # refusals that need both clusters: no volume, a volume that does not cover the path
    message = refusal(ip, capsys, f"--profile bare --name x --model-from {job.id}")
    assert message.startswith(f"--model-from: job {job.id} (ft): profile 'bare' has no model_volume")
    message = refusal(ip, capsys, f"--profile elsewhere --name x --model-from {job.id}")
    assert f"covers /data, not {newest}; the two profiles share no storage" in message


def test_slurm_refusals_running_and_no_checkpoint(
        both: Path, ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    cell(ip, capsys, "slurm_train", "--profile box --name sleeper --out sleeper",
         "import time\ntime.sleep(600)\n")
    sleeper = ip.user_ns["sleeper"]
    message = refusal(ip, capsys, f"--profile serving --name x --model-from box/{sleeper.id}")
    assert re.fullmatch(rf"--model-from: job {sleeper.id} \(sleeper\) is (PENDING|RUNNING|CONFIGURING), "
                        r"not COMPLETED; .*", message), message
    sleeper.cancel()

    cell(ip, capsys, "slurm_train", "--profile box --name empty --wait --out empty",
         "print('nothing saved')\n")
    empty = ip.user_ns["empty"]
    message = refusal(ip, capsys, "--profile serving --name x --model-from empty")
    assert f"job {empty.id} (empty) completed but left no checkpoint in {WORKDIR}/empty/{empty.id}/" \
        "checkpoints" in message


def test_resolution_asks_the_cluster_once_when_the_record_is_stale(
        both: Path, ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    """A job submitted and finished without anybody watching (as after a kernel restart): the
    registry still says PENDING; --model-from asks the cluster, which records the checkpoint."""
    tier = SlurmTier(load_config().profile("box"), Registry())
    try:
        job = tier.submit(tier.make_spec(TRAIN, name="unwatched"))
        assert Registry().get(job.key).state == "PENDING"
        deadline = time.monotonic() + GUARD
        while tier.poll_scheduler([job.record]).get(job.id) is None or \
                not tier.poll_scheduler([job.record])[job.id].state.terminal:
            assert time.monotonic() < deadline, "job did not end"
            time.sleep(1)
    finally:
        tier.close()
    Registry().update(job.key, state="PENDING")  # stale, as if nobody had looked
    api.close_all()
    shown = cell(ip, capsys, "k8s_serve", f"--profile serving --name late --model-from {job.id} --dry-run",
                 SERVE)
    assert f"/models/unwatched/{job.id}/checkpoints/ckpt-000100.pt" in shown
    assert Registry().get(job.key).state == "COMPLETED"

