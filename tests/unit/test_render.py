"""Rendering of a JobSpec into a Slurm job directory: snapshots, quoting of env values, validation."""

from __future__ import annotations

import io
import os
import re
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from jupyter_tiers.batch.jobdir import RANK_SHIM, render_env
from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.core.model import JobSpec
from jupyter_tiers.slurm.commands import pack_job
from jupyter_tiers.slurm.render import render_job, render_sbatch
from jupyter_tiers.spec.jobspec import parse_sbatch_option, validate_spec

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("JT_UPDATE_SNAPSHOTS") == "1"

SPECS: dict[str, JobSpec] = {
    "srun_2_nodes": JobSpec(
        script="import os\nprint(os.environ['RANK'])",
        name="hello",
        nodes=2,
        ntasks_per_node=4,
    ),
    "torchrun_2x2_full": JobSpec(
        script="import torch\nprint(torch.__version__)\n",
        name="ddp-train",
        nodes=2,
        launcher="torchrun",
        nproc_per_node=2,
        python="/opt/venv/bin/python",
        gpus_per_node="a100:8",
        switches="1@10:00",
        exclusive=True,
        requeue=True,
        constraint="a100&ib",
        env=(("WANDB_API_KEY", "s3cr3t-value"), ("NCCL_DEBUG", "INFO")),
        setup=("module load cuda/12.1", "source /opt/venv/bin/activate"),
        sbatch_options=("--hold", "--reservation=x", "--signal=B:USR1@60"),
    ),
    "torchrun_default_python_port": JobSpec(
        script="print(1)",
        name="tr",
        nodes=1,
        launcher="torchrun",
        ntasks_per_node=4,
        rdzv_port=29400,
    ),
    "srun_shell_resources": JobSpec(
        script="#!/bin/bash\nhostname",
        name="sh.job",
        shell=True,
        cpus_per_task=8,
        mem="16G",
        time="1-02:00:00",
        partition="gpu,debug",
        account="proj_a",
        qos="high",
    ),
}


def _check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / f"{name}.sbatch"
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"missing snapshot {path}; run with JT_UPDATE_SNAPSHOTS=1 to create it"
    expected = path.read_text(encoding="utf-8")
    assert text == expected, f"{path.name} differs from the rendered script"


# --- snapshots -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SPECS))
def test_render_sbatch_snapshot(name: str) -> None:
    _check_snapshot(name, render_sbatch(SPECS[name]))


@pytest.mark.parametrize("name", sorted(SPECS))
def test_render_job_script_is_render_sbatch(name: str) -> None:
    spec = SPECS[name]
    job = render_job(spec)
    assert job.script == render_sbatch(spec)
    assert job.files["job.sbatch"] == (job.script, 0o600)
    assert job.files["rank.sh"] == (RANK_SHIM, 0o700)


def test_render_job_files_python_and_shell() -> None:
    py = render_job(SPECS["srun_2_nodes"])
    assert set(py.files) == {"job.sbatch", "rank.sh", "main.py", ".rank-boot.py"}
    # The cell body is kept verbatim, with a final newline added.
    assert py.files["main.py"] == ("import os\nprint(os.environ['RANK'])\n", 0o600)
    assert '"$JT_JOB_DIR/main.py"' in py.script

    sh = render_job(SPECS["srun_shell_resources"])
    assert set(sh.files) == {"job.sbatch", "rank.sh", "main.sh"}
    assert sh.files["main.sh"] == ("#!/bin/bash\nhostname\n", 0o600)
    assert 'bash "$JT_JOB_DIR/main.sh"' in sh.script
    assert "main.py" not in sh.script


def test_torchrun_uses_one_task_per_node_and_world_size() -> None:
    script = render_sbatch(SPECS["torchrun_2x2_full"])
    assert "#SBATCH --ntasks-per-node=1\n" in script
    assert "--nproc-per-node=2" in script
    assert "export JT_WORLD_SIZE=4\n" in script
    assert "/opt/venv/bin/python -m torch.distributed.run" in script
    default = render_sbatch(SPECS["torchrun_default_python_port"])
    assert "  torchrun --nnodes=" in default
    assert "export MASTER_PORT=29400\n" in default
    assert "export JT_WORLD_SIZE=4\n" in default


def test_srun_world_size_and_tasks() -> None:
    script = render_sbatch(SPECS["srun_2_nodes"])
    assert "#SBATCH --ntasks-per-node=4\n" in script
    assert "export JT_WORLD_SIZE=8\n" in script
    assert "srun --kill-on-bad-exit=1 --ntasks-per-node=4 " in script
    assert "source" not in script  # no env, so no env.sh


_DIRECTIVE_RE = re.compile(r"^#SBATCH --[a-z][a-z0-9-]*(=[^\s=][^\s]*)?$")


@pytest.mark.parametrize("name", sorted(SPECS))
def test_directives_are_key_value_or_bare_flags_before_any_command(name: str) -> None:
    lines = render_sbatch(SPECS[name]).splitlines()
    assert lines[0] == "#!/bin/bash"
    directives = [ln for ln in lines if ln.startswith("#SBATCH")]
    assert directives, "no #SBATCH lines"
    for line in directives:
        assert _DIRECTIVE_RE.match(line), line
    # sbatch stops reading directives at the first command, so all of them must come first.
    first_command = next(
        i for i, ln in enumerate(lines) if i > 0 and ln.strip() and not ln.startswith("#")
    )
    assert all(i < first_command for i, ln in enumerate(lines) if ln.startswith("#SBATCH"))
    # the log location is managed, and appears exactly once
    assert directives.count("#SBATCH --output=job.log") == 1
    assert directives.count("#SBATCH --open-mode=append") == 1


def test_requeue_flag_and_passthrough_options() -> None:
    full = render_sbatch(SPECS["torchrun_2x2_full"]).splitlines()
    assert "#SBATCH --requeue" in full
    assert "#SBATCH --no-requeue" not in full
    assert "#SBATCH --exclusive" in full
    for line in ("#SBATCH --hold", "#SBATCH --reservation=x", "#SBATCH --signal=B:USR1@60"):
        assert line in full
    plain = render_sbatch(SPECS["srun_2_nodes"]).splitlines()
    assert "#SBATCH --no-requeue" in plain
    assert "#SBATCH --exclusive" not in plain


def test_setup_lines_come_after_env_and_before_launcher() -> None:
    lines = render_sbatch(SPECS["torchrun_2x2_full"]).splitlines()
    src = lines.index('source "$JT_JOB_DIR/env.sh"')
    mod = lines.index("module load cuda/12.1")
    act = lines.index("source /opt/venv/bin/activate")
    launch = next(i for i, ln in enumerate(lines) if ln.startswith("srun "))
    assert src < mod < act < launch


# --- env.sh ----------------------------------------------------------------------------------

NASTY_VALUES = [
    "$(touch {marker})",
    "`touch {marker}`",
    "it's \"quoted\" and 'single'",
    "line1\nline2\n",
    "a; touch {marker}; b",
    "x && touch {marker} || touch {marker}",
    "$HOME ${PATH} $0 $1 \\n \\",
    "'; touch {marker}; '",
    "",
    "ünïcödé ✓ \t tab",
    "> {marker}",
]


def test_env_values_reach_bash_literally(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    values = [v.replace("{marker}", str(marker)) for v in NASTY_VALUES]
    env = tuple((f"K{i}", v) for i, v in enumerate(values))
    spec = JobSpec(script="print(1)", env=env)
    job = render_job(spec)
    content, mode = job.files["env.sh"]
    assert mode == 0o600
    assert content == render_env(spec)
    env_sh = tmp_path / "env.sh"
    env_sh.write_text(content, encoding="utf-8")
    os.chmod(env_sh, mode)
    assert stat.S_IMODE(env_sh.stat().st_mode) == 0o600

    for i, value in enumerate(values):
        out = subprocess.run(
            ["bash", "-c", f'source ./env.sh; printf %s "$K{i}"'],
            cwd=tmp_path,
            capture_output=True,
            env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
            timeout=30,
            check=True,
        )
        assert out.stdout.decode("utf-8") == value, f"K{i}"
        assert out.stderr == b""
    assert not marker.exists(), "a value was executed by the shell"


@pytest.mark.parametrize("value", ["$(touch /tmp/x)", "`id`", "p@ss'w\"rd;", "multi\nline"])
def test_sbatch_script_contains_no_env_value(value: str) -> None:
    spec = JobSpec(script="print(1)", env=(("SECRET", value),))
    job = render_job(spec)
    assert value not in job.script
    assert 'source "$JT_JOB_DIR/env.sh"' in job.script
    assert "# env (values in env.sh, mode 600): SECRET" in job.script  # the name, never the value
    assert "env.sh" in job.files


def test_pack_job_keeps_env_sh_private() -> None:
    job = render_job(SPECS["torchrun_2x2_full"])
    with tarfile.open(fileobj=io.BytesIO(pack_job(job))) as tar:
        modes = {m.name: stat.S_IMODE(m.mode) for m in tar.getmembers()}
        env_text = tar.extractfile("env.sh").read().decode()  # type: ignore[union-attr]
    assert modes == {"env.sh": 0o600, "job.sbatch": 0o600, "main.py": 0o600, "rank.sh": 0o700,
                     ".rank-boot.py": 0o600}
    assert "export WANDB_API_KEY=s3cr3t-value\n" in env_text


def test_no_env_means_no_env_sh() -> None:
    job = render_job(SPECS["srun_2_nodes"])
    assert "env.sh" not in job.files
    assert render_env(SPECS["srun_2_nodes"]) == ""


# --- validation ------------------------------------------------------------------------------


def _spec(**kw: object) -> JobSpec:
    return JobSpec(script="print(1)", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"name": "a\nb"}, "name"),
        ({"name": "a;b"}, "name"),
        ({"name": "a b"}, "name"),
        ({"name": "$(id)"}, "name"),
        ({"name": "x$(id)"}, "name"),
        ({"name": ""}, "name"),
        ({"name": "-flag"}, "name"),
        ({"partition": "gpu;rm -rf"}, "partition"),
        ({"account": "a b"}, "account"),
        ({"qos": "$(id)"}, "qos"),
        ({"time": "1h"}, "time"),
        ({"time": "10:00:00:00"}, "time"),
        ({"time": "1-"}, "time"),
        ({"mem": "16GB"}, "mem"),
        ({"mem": "lots"}, "mem"),
        ({"mem": "-1G"}, "mem"),
        ({"switches": "1@"}, "switches"),
        ({"switches": "a"}, "switches"),
        ({"switches": "1@1h"}, "switches"),
        ({"gpus_per_node": "a100:"}, "gpus_per_node"),
        ({"gpus_per_node": "8 gpus"}, "gpus_per_node"),
        ({"constraint": "a b"}, "constraint"),
        ({"constraint": "a;b"}, "constraint"),
        ({"launcher": "mpirun"}, "launcher"),
        ({"launcher": "torchrun "}, "launcher"),
        ({"nodes": 0}, "nodes"),
        ({"nodes": -1}, "nodes"),
        ({"nodes": True}, "nodes"),
        ({"ntasks_per_node": 0}, "ntasks_per_node"),
        ({"rdzv_port": 70000}, "rdzv_port"),
        ({"python": "python3 -u"}, "python"),
        ({"python": "py;id"}, "python"),
    ],
)
def test_invalid_fields_raise_spec_error_naming_the_field(kw: dict[str, object], field: str) -> None:
    with pytest.raises(SpecError) as info:
        render_sbatch(_spec(**kw))
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")
    with pytest.raises(SpecError):
        render_job(_spec(**kw))


def test_env_key_with_dash_is_rejected() -> None:
    with pytest.raises(SpecError) as info:
        render_job(_spec(env=(("A-B", "1"),)))
    assert "env" in info.value.field
    assert "A-B" in info.value.field
    with pytest.raises(SpecError):
        validate_spec(_spec(env=(("1A", "1"),)))


def test_env_value_with_nul_and_setup_with_newline_are_rejected() -> None:
    with pytest.raises(SpecError) as info:
        validate_spec(_spec(env=(("K", "a\x00b"),)))
    assert info.value.field == "env K"
    with pytest.raises(SpecError) as info:
        validate_spec(_spec(setup=("ok", "module load x\nrm -rf ~")))
    assert info.value.field == "setup[1]"


@pytest.mark.parametrize(
    ("opt", "needle"),
    [
        ("--output=x", "--output"),
        ("--error=e.log", "--error"),
        ("--export=ALL", "--export"),
        ("--job-name=n", "--job-name"),
        ("--chdir=/tmp", "--chdir"),
        ("-x", "-x"),
        ("-N2", "-N2"),
        ("--Comment=x", "--Comment"),
        ("--comment=a b", "--comment"),
        ("--x=$(id)", "--x"),
        ("--comment=`id`", "--comment"),
        ("--comment='q'", "--comment"),
        ("--comment=a;b", "--comment"),
        ("--comment=a\nb", "--comment"),
        ("--hold extra", "--hold extra"),
    ],
)
def test_bad_sbatch_options(opt: str, needle: str) -> None:
    with pytest.raises(SpecError) as info:
        render_sbatch(_spec(sbatch_options=(opt,)))
    assert info.value.field == "sbatch option"
    assert needle in str(info.value)


def test_managed_option_explains_why() -> None:
    with pytest.raises(SpecError, match="log to the job directory"):
        parse_sbatch_option("--output=x")


@pytest.mark.parametrize(
    ("opt", "parsed"),
    [
        ("--hold", ("--hold", None)),
        ("--reservation=x", ("--reservation", "x")),
        ("--signal=B:USR1@60", ("--signal", "B:USR1@60")),
        ("--mail-type=END,FAIL", ("--mail-type", "END,FAIL")),
        ("--dependency=afterok:12:13", ("--dependency", "afterok:12:13")),
        ("--nodelist=node[1-3]", ("--nodelist", "node[1-3]")),
    ],
)
def test_good_sbatch_options(opt: str, parsed: tuple[str, str | None]) -> None:
    assert parse_sbatch_option(opt) == parsed
    line = f"#SBATCH {opt}"
    assert line in render_sbatch(_spec(sbatch_options=(opt,))).splitlines()


@pytest.mark.parametrize(
    "kw",
    [
        {"time": "30"},
        {"time": "30:00"},
        {"time": "01:30:00"},
        {"time": "2-12"},
        {"time": "2-12:30"},
        {"time": "2-12:30:00"},
        {"mem": "4000"},
        {"mem": "512m"},
        {"switches": "2"},
        {"switches": "1@1-00:00:00"},
        {"gpus_per_node": "8"},
        {"constraint": "[rack1|rack2]&ib"},
        {"name": "a.b_c+d=e@f-1"},
    ],
)
def test_valid_values_render(kw: dict[str, object]) -> None:
    script = render_sbatch(_spec(**kw))
    value = next(iter(kw.values()))
    assert f"={value}\n" in script
