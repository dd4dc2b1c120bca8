"""The scripts jupyter-tiers writes for a job are shellcheck-clean (``--norc``: no rc file hides a
finding): the sbatch script of each launcher and shape (srun, torchrun, a shell body with env and
setup, an array, a sweep, --requeue with --signal and a checkpoint directory), the rank shim, and
the local tier's batch step. Before, every one carried SC2174 (``mkdir -p -m``) on its checkpoint
line. Only SC1091 is excluded: ``source "$JT_JOB_DIR/env.sh"`` names a file of the job directory
that exists only when the job runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from jupyter_tiers.batch.jobdir import RANK_SHIM
from jupyter_tiers.core.model import JobSpec
from jupyter_tiers.local.tier import render_batch
from jupyter_tiers.slurm.render import render_sbatch

SPECS = {
    "srun": JobSpec(script="print(1)", name="srun-job", nodes=2, ntasks_per_node=4, partition="debug"),
    "torchrun": JobSpec(script="print(1)", name="ddp", nodes=2, launcher="torchrun", nproc_per_node=2,
                        rdzv_port=29511, gpus_per_node="2"),
    "shell-env-setup": JobSpec(script="echo hi", shell=True, env=(("TOKEN", "s3cret value"),),
                               setup=("module load cuda",)),
    "array": JobSpec(script="print(1)", array="0-7%2"),
    "sweep": JobSpec(script="print(1)", sweep="lr=1e-4,3e-4 bs=32,64"),
    "requeue-signal": JobSpec(script="print(1)", requeue=True, signal="USR1@120", time="00:30:00",
                              checkpoint_dir="~/checkpoints/run-1"),
    "torchrun-signal": JobSpec(script="print(1)", launcher="torchrun", nodes=2, nproc_per_node=2,
                               signal="USR2@60", requeue=True),
}


def _scripts() -> dict[str, str]:
    scripts = {f"sbatch-{name}": render_sbatch(spec) for name, spec in SPECS.items()}
    scripts["rank.sh"] = RANK_SHIM
    for name in ("srun", "torchrun", "shell-env-setup"):
        scripts[f"local-job.sh-{name}"] = render_batch(SPECS[name])
    return scripts


@pytest.mark.parametrize("name", sorted(_scripts()))
def test_rendered_script_is_shellcheck_clean(name: str, tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (tests/run.sh installs it with apt-get as root)")
    text = _scripts()[name]
    assert "mkdir -p -m" not in text
    path = tmp_path / "script.sh"
    path.write_text(text)
    result = subprocess.run([shellcheck, "--norc", "--shell=bash", "--exclude=SC1091", str(path)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, f"{name}:\n{result.stdout}{result.stderr}\n--- script ---\n{text}"
