"""jobenv: the enclosing Slurm job, and the clean environment of the commands run on this machine."""

from __future__ import annotations

import random
import string

from jupyter_tiers.batch.jobenv import EnclosingJob, clean_env, enclosing_job

SEED = 20261204

# What a kernel started by Open OnDemand's Jupyter app (sbatch --cpus-per-task=4 --mem-per-cpu=2G)
# has in its environment, with a site's module and the user's torch launcher.
INSIDE = {
    "PATH": "/opt/slurm/bin:/usr/bin", "HOME": "/home/al", "SLURM_CONF": "/etc/slurm/site.conf",
    "MODULEPATH": "/opt/modules", "LOADEDMODULES": "slurm/23.11", "_LMFILES_": "/opt/m/slurm",
    "SLURM_JOB_ID": "4242", "SLURM_JOBID": "4242", "SLURM_MEM_PER_CPU": "2048",
    "SLURM_CPUS_PER_TASK": "4", "SLURM_CPU_BIND": "quiet,mask_cpu:0x3", "SLURMD_NODENAME": "c17",
    "SLURM_JOB_NAME": "ood-jupyter", "SRUN_CPUS_PER_TASK": "4", "SALLOC_ACCOUNT": "x",
    "PMI_RANK": "0", "PMIX_RANK": "0", "SBATCH_TIMELIMIT": "01:00:00", "SBATCH_PARTITION": "interactive",
    "MASTER_ADDR": "c17", "MASTER_PORT": "29500", "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
    "LOCAL_WORLD_SIZE": "1", "CUDA_VISIBLE_DEVICES": "0", "JUPYTER_TIERS_CONFIG": "/home/al/t.yaml",
}
DROPPED = {"SLURM_JOB_ID", "SLURM_JOBID", "SLURM_MEM_PER_CPU", "SLURM_CPUS_PER_TASK", "SLURM_CPU_BIND",
           "SLURMD_NODENAME", "SLURM_JOB_NAME", "SRUN_CPUS_PER_TASK", "SALLOC_ACCOUNT", "PMI_RANK",
           "PMIX_RANK", "SBATCH_TIMELIMIT", "SBATCH_PARTITION", "MASTER_ADDR", "MASTER_PORT", "RANK",
           "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}


def test_inside_a_job_every_variable_of_the_job_is_dropped_and_the_site_kept() -> None:
    out = clean_env(INSIDE)
    assert set(INSIDE) - set(out) == DROPPED
    assert {k: out[k] for k in out} == {k: v for k, v in INSIDE.items() if k not in DROPPED}
    assert out["SLURM_CONF"] == "/etc/slurm/site.conf" and out["PATH"] == INSIDE["PATH"]
    assert out["LOADEDMODULES"] == "slurm/23.11"


def test_outside_a_job_sbatch_variables_are_the_sites_and_stay() -> None:
    env = {"PATH": "/usr/bin", "SBATCH_ACCOUNT": "lab", "SLURM_TIME_FORMAT": "relative", "RANK": "3"}
    assert clean_env(env) == {"PATH": "/usr/bin", "SBATCH_ACCOUNT": "lab"}


def test_inside_a_job_no_sbatch_variable_is_kept() -> None:
    out = clean_env(INSIDE)
    assert not [k for k in out if k.startswith(("SBATCH_", "SRUN_", "SALLOC_"))]


def test_the_given_environment_is_not_changed() -> None:
    env = dict(INSIDE)
    clean_env(env)
    assert env == INSIDE


def test_enclosing_job_names_the_job_and_node() -> None:
    job = enclosing_job(INSIDE)
    assert job == EnclosingJob("4242", "c17", "ood-jupyter")
    assert job is not None and "inside Slurm job 4242 on node c17" in job.sentence()
    assert enclosing_job({"SLURM_JOBID": "7"}) == EnclosingJob("7")  # older Slurm's name
    assert enclosing_job({"PATH": "/bin"}) is None
    assert enclosing_job({"SLURM_JOB_ID": "12; rm -rf /"}) is None
    task = {"SLURM_JOB_ID": "101", "SLURM_ARRAY_JOB_ID": "100", "SLURM_ARRAY_TASK_ID": "1"}
    assert enclosing_job(task) == EnclosingJob("100_1", raw_id="101")  # the task runs as job 101


def _name(rng: random.Random) -> str:
    prefix = rng.choice(["SLURM_", "SLURMD_", "SRUN_", "SALLOC_", "PMI_", "PMIX_", "SBATCH_", "",
                         "SLURMX", "PM", "MY_", "slurm_", "SLURM"])
    return prefix + "".join(rng.choice(string.ascii_uppercase + "_") for _ in range(rng.randint(0, 8)))


def test_fuzz_clean_env() -> None:
    """Random environments: nothing of a job's survives, everything else does, unchanged."""
    rng = random.Random(SEED)
    torch = ["MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"]
    for _ in range(2000):
        env = {_name(rng): rng.choice(["", "1", "x y", "a=b", "\u00e9"]) for _ in range(rng.randint(0, 12))}
        env.update({n: "1" for n in rng.sample(torch, rng.randint(0, 2))})
        if rng.random() < 0.3:
            env["SLURM_CONF"] = "/etc/s.conf"
        if rng.random() < 0.5:
            env["SLURM_JOB_ID"] = str(rng.randint(1, 10**6))
        inside = enclosing_job(env) is not None
        out = clean_env(env)
        for k, v in env.items():
            job_var = (k.startswith(("SLURM_", "SLURMD_", "SRUN_", "SALLOC_", "PMI_", "PMIX_"))
                       and k != "SLURM_CONF") or k in torch or (inside and k.startswith("SBATCH_"))
            assert (k in out) == (not job_var), (k, inside)
            if k in out:
                assert out[k] == v
        assert set(out) <= set(env)
