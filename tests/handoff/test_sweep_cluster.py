"""``--model-from`` a sweep on the real Slurm test cluster (over the real sshd), served by the
Kubernetes API emulator: one 3-task array, a task named ``NAME_i`` served and queried, the whole
array's best task chosen, and every task's checkpoint (a task writes under its own raw job id)
and log end found by one remote command. Waits are bounded only so a broken tier fails instead
of hanging."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
import yaml
from IPython.core.interactiveshell import InteractiveShell

from jupyter_tiers import api
from tests.handoff.conftest import weights_server
from tests.handoff.test_cluster_handoff import WORKDIR, both, cell, counting, ip, refusal  # noqa: F401

# In the lane beside the slurm lane (tests/run.sh), sharing the cluster.
pytestmark = [pytest.mark.cluster, pytest.mark.slurm_beside]

SWEEP = """\
import os, pathlib
lr = params["lr"]
d = os.environ["JT_CHECKPOINT_DIR"]
pathlib.Path(d, "model.pt").write_text(f"weights lr={lr}")
print(f"ckpt {d} job {os.environ['SLURM_JOB_ID']} task {os.environ['SLURM_ARRAY_TASK_ID']}", flush=True)
print(f"loss={abs(lr - 0.2) + 0.01:.4f}", flush=True)
"""

SERVE = weights_server("0.0.0.0", "JT_PORT")


def _model_path(shown: str) -> str:
    objects = {o["kind"]: o for o in yaml.safe_load_all(shown.split("\n", 1)[1]) if o}
    env = objects["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]
    return next(e["value"] for e in env if e["name"] == "JT_MODEL_PATH")


def test_a_slurm_sweep_task_and_its_best_task_served_on_kubernetes(
        both: Path, ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    out = cell(ip, capsys, "slurm_train",
               '--profile box --name sweep-ho --sweep "lr=0.1,0.2,0.3" --wait --out job', SWEEP)
    job = ip.user_ns["job"]
    assert out.rstrip().endswith("; best loss 0.01 at lr=0.2"), out
    logs = job.logs()
    # each task wrote under its own raw job id, which is not "ID_i"
    dirs = {}
    for line in logs.splitlines():
        words = line.split()
        if len(words) == 7 and words[1] == "ckpt":
            dirs[int(words[6])] = words[2]
            assert words[2] == f"{WORKDIR}/sweep-ho/{words[4]}/checkpoints", line
    assert sorted(dirs) == [0, 1, 2], logs

    commands = counting(api.connect("box"))  # type: ignore[arg-type]
    shown = cell(ip, capsys, "k8s_serve", "--profile serving --name sweep-one --model-from sweep-ho_2 "
                 "--dry-run", SERVE)
    assert shown.splitlines()[0] == f"model from array {job.id} task 2 (lr=0.3)", shown
    assert _model_path(shown) == "/models" + dirs[2][len(WORKDIR):] + "/model.pt"

    shown = cell(ip, capsys, "k8s_serve", f"--profile serving --name sweep-best --model-from {job.id} "
                 "--dry-run", SERVE)
    assert shown.splitlines()[0] == f"model from array {job.id} task 1 (best loss 0.01 at lr=0.2)", shown
    assert _model_path(shown) == "/models" + dirs[1][len(WORKDIR):] + "/model.pt"
    listings = [argv for argv in commands if "jt-task-checkpoints" in argv]
    tails = [argv for argv in commands if "jt-tail" in argv]
    assert len(listings) == 2 and not tails, commands  # one per cell, never one per task

    out = cell(ip, capsys, "k8s_serve", "--profile serving --name sweep-one --model-from sweep-ho_2 "
               "--wait --out svc", SERVE)
    assert out.splitlines()[0] == f"model from array {job.id} task 2 (lr=0.3)" and " READY 1/1" in out, out
    url = ip.user_ns["svc"].port_forward()
    with urllib.request.urlopen(url, timeout=30) as resp:
        assert resp.read().decode() == "weights lr=0.3"

    message = refusal(ip, capsys, f"--profile serving --name x --model-from {job.id}_7")
    assert message == f"--model-from {job.id}_7: array {job.id} (sweep-ho) has no task 7; its tasks: 0-2"
    message = refusal(ip, capsys, f"--profile bare --name x --model-from box/{job.id}_0")
    assert message.startswith(f"--model-from: job {job.id}_0 (sweep-ho): profile 'bare' has no model_volume")
