"""``--model-from`` a sweep on the local tier, for real: a 3-task sweep whose tasks write their own
checkpoints, the best task served on the local serving tier and queried over HTTP; a task named
by ``ID_i``, ``NAME_i`` and a task handle; the refusals. Waits are bounded only so a broken tier
fails instead of hanging; no assertion is on time."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from jupyter_tiers.config.registry import Registry
from tests.handoff.conftest import weights_server
from tests.handoff.test_local_handoff import cell, refused
from tests.helpers import tiers_shell

# Each task saves a checkpoint naming its learning rate and reports a loss that is lowest at
# lr=0.2 (the middle task, so neither the first nor the last wins by accident).
SWEEP = """\
import os, pathlib
lr = params["lr"]
pathlib.Path(os.environ["JT_CHECKPOINT_DIR"], "model.pt").write_text(f"weights lr={lr}")
print(f"loss={abs(lr - 0.2) + 0.01:.4f}", flush=True)
"""

SERVE = weights_server("127.0.0.1", "PORT")


@pytest.fixture(scope="module")
def ip() -> InteractiveShell:
    return tiers_shell()


pytestmark = pytest.mark.usefixtures("isolated_local")


def _ckpt(job: object, index: int) -> str:
    array = job.record  # type: ignore[attr-defined]
    return f"{Path(array.jobdir).parent}/{array.name}/{array.job_id}_{index}/checkpoints/model.pt"


def test_a_whole_sweep_serves_its_best_task_over_http(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = cell(ip, capsys, "slurm_train", '--name sw --sweep "lr=0.1,0.2,0.3" --wait --out job', SWEEP)
    job = ip.user_ns["job"]
    assert out.strip().splitlines()[-1].endswith("; best loss 0.01 at lr=0.2"), out

    out, _ = cell(ip, capsys, "k8s_serve", f"--name best --model-from {job.id} --wait --out svc", SERVE)
    assert out.splitlines()[0] == f"model from array {job.id} task 1 (best loss 0.01 at lr=0.2)", out
    svc = ip.user_ns["svc"]
    with urllib.request.urlopen(svc.url, timeout=30) as resp:
        assert resp.read().decode() == "weights lr=0.2"
    stored = Registry().get(svc.key)
    assert stored.spec["model_path"] == _ckpt(job, 1)
    assert stored.spec["model_source"] == f"local/{job.id}_1 (sw)"

    # the array's name and a variable holding the ArrayJob resolve the same way
    for ref in ("sw", "job"):
        out, _ = cell(ip, capsys, "k8s_serve", f"--name by-{ref} --model-from {ref} --dry-run", SERVE)
        assert out.splitlines()[0].startswith(f"model from array {job.id} task 1 (best loss"), out
        assert _ckpt(job, 1) in out


def test_one_task_by_id_name_and_handle(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    cell(ip, capsys, "slurm_train", '--name pick --sweep "lr=0.1,0.2,0.3" --wait --out job', SWEEP)
    job = ip.user_ns["job"]
    ip.user_ns["third"] = job.task(2)
    for ref, index in ((f"{job.id}_0", 0), ("pick_2", 2), (f"local/{job.id}_0", 0), ("third", 2)):
        out, _ = cell(ip, capsys, "k8s_serve", f"--name one --model-from {ref} --dry-run", SERVE)
        lr = ("0.1", "0.2", "0.3")[index]
        assert out.splitlines()[0] == f"model from array {job.id} task {index} (lr={lr})", (ref, out)
        assert _ckpt(job, index) in out, (ref, out)

    out, _ = cell(ip, capsys, "k8s_serve", f"--name one --model-from {job.id}_2 --wait --out svc", SERVE)
    with urllib.request.urlopen(ip.user_ns["svc"].url, timeout=30) as resp:
        assert resp.read().decode() == "weights lr=0.3"


FAIL_MIDDLE = """\
import os, pathlib, sys
lr = params["lr"]
if lr == 0.2:
    sys.exit(3)
if lr == 0.3:
    pathlib.Path(os.environ["JT_CHECKPOINT_DIR"], "model.pt").write_text("w")
print(f"loss={abs(lr - 0.2) + 0.01:.4f}", flush=True)
"""


def test_refusals_name_the_task_and_what_is_missing(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    cell(ip, capsys, "slurm_train", '--name mixed --sweep "lr=0.1,0.2,0.3" --wait --out job', FAIL_MIDDLE)
    job = ip.user_ns["job"]
    assert refused(ip, capsys, "k8s_serve", f"--name x --model-from {job.id}_1", SERVE) == (
        f"--model-from: job {job.id}_1 (mixed) is FAILED, not COMPLETED; a model is served from a "
        "job that completed")
    message = refused(ip, capsys, "k8s_serve", "--name x --model-from mixed_0", SERVE)
    assert message.startswith(f"--model-from: job {job.id}_0 (mixed) completed but left no checkpoint in "
                              f"{Path(job.record.jobdir).parent}/mixed/{job.id}_0/checkpoints"), message
    assert refused(ip, capsys, "k8s_serve", f"--name x --model-from {job.id}_9", SERVE) == (
        f"--model-from {job.id}_9: array {job.id} (mixed) has no task 9; its tasks: 0-2")
    # the whole array: task 0 has the best loss but no checkpoint, task 1 failed -> task 2
    out, _ = cell(ip, capsys, "k8s_serve", f"--name x --model-from {job.id} --dry-run", SERVE)
    assert out.splitlines()[0] == f"model from array {job.id} task 2 (best loss 0.11 at lr=0.3)", out

    cell(ip, capsys, "slurm_train", '--name bare --sweep "lr=0.1,0.2" --wait --out bare', "print('x')\n")
    bare = ip.user_ns["bare"]
    assert refused(ip, capsys, "k8s_serve", "--name x --model-from bare", SERVE) == (
        f"--model-from {bare.id}: array {bare.id} (bare): none of its 2 COMPLETED tasks left a "
        "checkpoint (save one under $JT_CHECKPOINT_DIR)")
