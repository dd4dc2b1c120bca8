"""Issue 9, bad input in job specs: fullmatch (no trailing newline), sbatch abbreviations of
managed options, reserved --env names, bounded numbers, '~' in --python, undecodable env values."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.core.model import JobSpec
from jupyter_tiers.local import slurmenv
from jupyter_tiers.slurm.render import render_sbatch, shell_path
from jupyter_tiers.spec.jobspec import RESERVED_ENV_NAMES, parse_sbatch_option, validate_spec


def _spec(**kw: object) -> JobSpec:
    return JobSpec(script="print(1)", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("field, value", [
    ("name", "job\n"), ("time", "10\n"), ("mem", "4G\n"), ("partition", "gpu\n"), ("account", "a\n"),
    ("qos", "q\n"), ("constraint", "a100\n"), ("switches", "1@10:00\n"), ("gpus_per_node", "8\n"),
    ("python", "python3\n"),
])
def test_trailing_newline_refused(field: str, value: str) -> None:
    with pytest.raises(SpecError) as info:
        validate_spec(_spec(**{field: value}))
    assert info.value.field == field


def test_trailing_newline_in_sbatch_option_refused() -> None:
    for opt in ("--hold\n", "--comment=x\n"):
        with pytest.raises(SpecError):
            parse_sbatch_option(opt)


@pytest.mark.parametrize("opt, means", [
    ("--ntasks-per-n=2", "--ntasks-per-node"), ("--open-m=truncate", "--open-mode"),
    ("--arr=1-3", "--array"), ("--chd=/tmp", "--chdir"), ("--wra=id", "--wrap"),
    ("--outp=/tmp/x", "--output"), ("--err=/tmp/x", "--error"), ("--job-n=x", "--job-name"),
    ("--pars", "--parsable"), ("--expo=ALL", "--export"), ("--node=3", "--nodes"),
])
def test_abbreviations_of_managed_options_refused(opt: str, means: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_sbatch_option(opt)
    assert means in info.value.problem


@pytest.mark.parametrize("opt", ["--ntasks=4", "--hold", "--comment=x", "--nodelist=node[1-2]",
                                 "--no-requeue", "--ntasks-per-core=1", "--mail-type=END",
                                 "--contiguous"])
def test_real_options_still_pass(opt: str) -> None:
    assert parse_sbatch_option(opt)[0] == opt.partition("=")[0]


@pytest.mark.parametrize("bad", [1, None, ("--hold",), b"--hold"])
def test_non_string_sbatch_option_is_a_spec_error(bad: object) -> None:
    with pytest.raises(SpecError):
        validate_spec(_spec(sbatch_options=(bad,)))


@pytest.mark.parametrize("name", ["JT_JOB_DIR", "JT_ANYTHING", "SLURM_PROCID", "SLURMD_NODENAME", "RANK",
                                  "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "PATH",
                                  "TORCHELASTIC_RUN_ID", "IFS", "BASH_ENV"])
def test_reserved_env_names_refused(name: str) -> None:
    with pytest.raises(SpecError) as info:
        validate_spec(_spec(env=((name, "s3cr3t"),)))
    assert info.value.field == f"env {name}"
    assert "reserved" in info.value.problem
    assert "s3cr3t" not in str(info.value)


def test_reserved_names_cover_what_the_local_supervisor_sets() -> None:
    from jupyter_tiers.spec.jobspec import RESERVED_ENV_PREFIXES

    for name in (*slurmenv.JOB_ENV_NAMES, *slurmenv.RANK_ENV_NAMES, *slurmenv.TORCHRUN_ENV_NAMES):
        if name == "OMP_NUM_THREADS":  # torchrun sets it only when unset: the user's value wins
            continue
        assert name in RESERVED_ENV_NAMES or name.startswith(RESERVED_ENV_PREFIXES), name


def test_ordinary_env_names_pass() -> None:
    validate_spec(_spec(env=(("OMP_NUM_THREADS", "4"), ("WANDB_API_KEY", "x"), ("NCCL_DEBUG", "INFO"))))


def test_lone_surrogate_env_value_is_a_spec_error() -> None:
    with pytest.raises(SpecError) as info:
        validate_spec(_spec(env=(("TOKEN", "abc\udcff"),)))
    assert info.value.field == "env TOKEN"
    assert "UTF-8" in info.value.problem


@pytest.mark.parametrize("value", ["9" * 400, "9" * 20, "1" * 9 + ":00", "99999999-00", "1-" + "9" * 50])
def test_huge_times_refused(value: str) -> None:
    with pytest.raises(SpecError) as info:
        validate_spec(_spec(time=value))
    assert info.value.field == "time"
    assert len(str(info.value)) < 200  # the value is cut short in the message


def test_largest_time_still_converts() -> None:
    for value in ("99999999", "99999-23:59:59", "999999:59:59"):
        validate_spec(_spec(time=value))
        limit = slurmenv.parse_time_limit(value)
        assert limit is not None and limit < 1e13


@pytest.mark.parametrize("value", ["9" * 40, "1" * 16 + "G"])
def test_huge_mem_refused(value: str) -> None:
    with pytest.raises(SpecError):
        validate_spec(_spec(mem=value))


@pytest.mark.parametrize("python", ["~user/bin/python", "py~thon", "-c", "~", "a b"])
def test_python_tilde_only_in_front(python: str) -> None:
    with pytest.raises(SpecError):
        validate_spec(_spec(python=python))


def test_tilde_python_expands_to_home_in_the_script(tmp_path: Path) -> None:
    word = shell_path("~/venv/bin/python")
    assert word == "\"$HOME\"/venv/bin/python"
    out = subprocess.run(["bash", "-c", f"printf '%s' {word}"], capture_output=True, text=True,
                         env={"HOME": str(tmp_path)}, check=True).stdout
    assert out == f"{tmp_path}/venv/bin/python"
    script = render_sbatch(_spec(python="~/venv/bin/python", launcher="srun"))
    assert "\"$HOME\"/venv/bin/python \"$JT_JOB_DIR/main.py\"" in script
    torchrun = render_sbatch(_spec(python="~/venv/bin/python", launcher="torchrun"))
    assert "\"$HOME\"/venv/bin/python -m torch.distributed.run" in torchrun
    assert shell_path("/opt/py 3/python") == "'/opt/py 3/python'"


def test_job_script_sets_umask_077_before_anything_else() -> None:
    script = render_sbatch(_spec(launcher="srun"))
    body = [line for line in script.splitlines() if line and not line.startswith("#")]
    assert body[0].split("#")[0].split() == ["umask", "077"]


def test_env_values_never_in_reprs() -> None:
    from jupyter_tiers.config.profiles import Profile
    from jupyter_tiers.core.model import ServeSpec

    assert "s3cr3t" not in repr(_spec(env=(("TOKEN", "s3cr3t"),)))
    assert "s3cr3t" not in repr(ServeSpec(body="x", name="a", image="i", env=(("TOKEN", "s3cr3t"),)))
    assert "s3cr3t" not in repr(Profile(name="p", tier="local", env={"TOKEN": "s3cr3t"}))


def test_remote_command_patterns_refuse_a_trailing_newline() -> None:
    from jupyter_tiers.slurm import commands

    with pytest.raises(SpecError):
        commands.check_job_id("12\n")
    with pytest.raises(SpecError):
        commands.check_workdir("~/jt\n")
    with pytest.raises(SpecError):
        commands.cancel_argv("12", "TERM\n")
    assert commands.unwrap_slurm(commands.cancel_argv("12", "TERM")) == ["scancel", "--signal", "TERM", "12"]
