"""``%%slurm_train`` and ``%tiers`` driven through IPython's test shell, as a user types them.

Three groups:

- dry-run and bad input, against a slurm profile whose host cannot be reached (dry-run must not
  connect; any connection attempt fails the test);
- the local tier (real processes, no cluster);
- the Slurm test cluster (``pytest.mark.cluster``), with the text view
  (``JUPYTER_TIERS_DISPLAY=text``) since the test shell has no widget front end.

Waits are bounded only so that a broken tier fails instead of hanging; nothing asserts on time.
"""

from __future__ import annotations

import functools
import re
import socket
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_tiers import api
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.model import JobState
from jupyter_tiers.engine.tier import Job
from tests import helpers
from tests.helpers import cancel_registered_jobs, isolate_tiers, tiers_shell

GUARD = 180.0  # seconds; bounds every wait

SUMMARY_OK = re.compile(r"^job (\d+) COMPLETED in \d\d:\d\d:\d\d on (\S+)$")
SUMMARY_FAILED = re.compile(
    r"^job (\d+) FAILED in \d\d:\d\d:\d\d — first failure: rank (\d+) \((\S+)\) exit (\d+);"
    r" (\d+) ranks? stopped$"
)

# TEST-NET-1 (RFC 5737): nothing answers there, so a connection attempt would hang or fail.
UNREACHABLE_YAML = textwrap.dedent(
    """\
    profiles:
      far:
        tier: slurm
        host: 192.0.2.1
        port: 22
        user: nobody
        connect_timeout: 1
        defaults: {partition: debug}
    """
)
SLEEPER = "import time\nprint('sleeping', flush=True)\ntime.sleep(300)\n"


# --- fixtures ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ip() -> InteractiveShell:
    return tiers_shell()


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No system/user/project tiers.yaml, the local tier's jobs under tmp_path, text display,
    and the venv's python first on PATH (the local tier runs ``python3`` from PATH)."""
    isolate_tiers(tmp_path, monkeypatch)
    yield
    # Leave no job running and no cached tier behind (a cached tier keeps this test's registry).
    cancel_registered_jobs()


@pytest.fixture
def far(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tiers.yaml with slurm profile ``far`` on an unreachable host."""
    path = tmp_path / "tiers.yaml"
    path.write_text(UNREACHABLE_YAML)
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    return path


@pytest.fixture
def no_connect(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Any attempt to open an SSH transport or a socket is recorded and fails the magic."""
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args)
        raise AssertionError(f"tried to connect: {args!r}")

    monkeypatch.setattr("jupyter_tiers.slurm.tier.transport_for", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts


@pytest.fixture
def box(cluster_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A tiers.yaml with the test cluster's ``box`` slurm profile; returns the profile name."""
    from tests.cluster.conftest import profile_yaml

    path = tmp_path / "tiers.yaml"
    path.write_text(profile_yaml(cluster_env))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    return "box"


# --- helpers -----------------------------------------------------------------------------------
def train(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], line: str, body: str) -> str:
    """Run ``%%slurm_train LINE`` with ``body``; returns what it printed."""
    capsys.readouterr()
    ip.run_cell_magic("slurm_train", line, body)
    return capsys.readouterr().out


def tiers(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], line: str) -> str:
    capsys.readouterr()
    ip.run_line_magic("tiers", line)
    return capsys.readouterr().out


def dry_run(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], line: str) -> str:
    return train(ip, capsys, f"--profile far --dry-run {line}", "print('hi')\n")


def last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert lines, "nothing was printed"
    return lines[-1]


wait_for = functools.partial(helpers.wait_for, timeout=GUARD, interval=0.2)


def usage_error(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], cell: str) -> str:
    """Run a whole cell as a user would; it must fail with a UsageError and no traceback.
    Returns the error message."""
    capsys.readouterr()
    result = ip.run_cell(cell)
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    assert isinstance(result.error_in_exec, UsageError), (result.error_in_exec, printed)
    assert "Traceback" not in printed and "-----" not in printed, printed
    assert "UsageError: " in captured.err
    return str(result.error_in_exec)


# --- dry-run: every option reaches the rendered script -----------------------------------------
OPTION_CASES: list[tuple[str, list[str]]] = [
    ("--name llama-ft", ["#SBATCH --job-name=llama-ft"]),
    ("-n short", ["#SBATCH --job-name=short"]),
    ("--nodes 3", ["#SBATCH --nodes=3", "export JT_WORLD_SIZE=3"]),
    ("-N 2", ["#SBATCH --nodes=2"]),
    ("--ntasks-per-node 4",
     ["#SBATCH --ntasks-per-node=4", "srun --kill-on-bad-exit=1 --ntasks-per-node=4 "]),
    ("--gpus-per-node a100:8", ["#SBATCH --gpus-per-node=a100:8"]),
    ("--gpus-per-node 4", ["#SBATCH --gpus-per-node=4"]),
    ("--cpus-per-task 6", ["#SBATCH --cpus-per-task=6"]),
    ("--mem 16G", ["#SBATCH --mem=16G"]),
    ("--time 01:30:00", ["#SBATCH --time=01:30:00"]),
    ("-t 45", ["#SBATCH --time=45"]),
    ("--partition gpu", ["#SBATCH --partition=gpu"]),
    ("--account proj-42", ["#SBATCH --account=proj-42"]),
    ("--qos high", ["#SBATCH --qos=high"]),
    ("--constraint 'a100&ib'", ["#SBATCH --constraint=a100&ib"]),
    ("--exclusive", ["#SBATCH --exclusive"]),
    ("--requeue", ["#SBATCH --requeue"]),
    ("--switches 1@00:10:00", ["#SBATCH --switches=1@00:10:00"]),
    ("--launcher torchrun --nproc-per-node 4",
     ["#SBATCH --ntasks-per-node=1", "export JT_WORLD_SIZE=4", "  torchrun --nnodes=",
      "--nproc-per-node=4", "--rdzv-backend=c10d"]),
    ("--launcher torchrun --nproc-per-node 2 --python /opt/conda/bin/python",
     ["/opt/conda/bin/python -m torch.distributed.run --nnodes=",
      '/opt/conda/bin/python "$JT_JOB_DIR/main.py"']),
    ("--python /opt/conda/bin/python", ['/opt/conda/bin/python "$JT_JOB_DIR/main.py"']),
    ("--shell", ['bash "$JT_JOB_DIR/main.sh"']),
    ("--sbatch --hold", ["#SBATCH --hold"]),
    ("--sbatch=--reservation=x", ["#SBATCH --reservation=x"]),
    ("--sbatch --hold --sbatch=--reservation=x --sbatch --mail-type=END",
     ["#SBATCH --hold", "#SBATCH --reservation=x", "#SBATCH --mail-type=END"]),
    ("--sbatch '--comment=nightly'", ["#SBATCH --comment=nightly"]),
]


@pytest.mark.parametrize(("line", "expected"), OPTION_CASES, ids=[c[0] for c in OPTION_CASES])
def test_dry_run_renders_option(ip, capsys, far, no_connect, line: str, expected: list[str]) -> None:
    out = dry_run(ip, capsys, line)
    assert out.startswith("#!/bin/bash\n")
    for text in expected:
        assert text in out, f"{text!r} missing from:\n{out}"
    assert no_connect == []


def test_dry_run_defaults_come_from_the_profile(ip, capsys, far, no_connect) -> None:
    out = dry_run(ip, capsys, "")
    assert "#SBATCH --partition=debug" in out  # the profile's default
    assert "#SBATCH --nodes=1" in out and "#SBATCH --no-requeue" in out
    assert "--exclusive" not in out and "--switches" not in out
    assert 'python3 "$JT_JOB_DIR/main.py"' in out
    # An option on the line overrides the profile's default.
    out = dry_run(ip, capsys, "--partition gpu --requeue")
    assert "#SBATCH --partition=gpu" in out and "--partition=debug" not in out
    assert "#SBATCH --requeue" in out and "--no-requeue" not in out


def test_dry_run_with_every_option_at_once(ip, capsys, far, no_connect) -> None:
    line = (
        "--name all-in -N 2 --gpus-per-node a100:8 --cpus-per-task 6 --mem 16G -t 01:00:00"
        " --partition gpu --account acct --qos high --constraint 'a100&ib' --exclusive --requeue"
        " --switches 1@10:00 --launcher torchrun --nproc-per-node 8 --python /opt/py/bin/python"
        " -e HF_TOKEN=hf_s3cr3t --sbatch --hold --sbatch=--reservation=x"
    )
    out = dry_run(ip, capsys, line)
    for text in [
        "--job-name=all-in", "--nodes=2", "--gpus-per-node=a100:8", "--cpus-per-task=6",
        "--mem=16G", "--time=01:00:00", "--partition=gpu", "--account=acct", "--qos=high",
        "--constraint=a100&ib", "#SBATCH --exclusive", "#SBATCH --requeue", "--switches=1@10:00",
        "#SBATCH --hold", "#SBATCH --reservation=x", "export JT_WORLD_SIZE=16",
        "/opt/py/bin/python -m torch.distributed.run", "--nproc-per-node=8", "HF_TOKEN",
    ]:
        assert text in out, f"{text!r} missing from:\n{out}"
    assert "hf_s3cr3t" not in out
    assert no_connect == []


def test_dry_run_prints_env_names_never_values(ip, capsys, far, no_connect) -> None:
    out = dry_run(ip, capsys, "--env WANDB_API_KEY=wb-s3cr3t -e MODE=f4st-m0de --env 'MSG=hello there'")
    for name in ("WANDB_API_KEY", "MODE", "MSG"):
        assert re.search(rf"^#.*\b{name}\b", out, re.M), f"env name {name} not shown:\n{out}"
    assert 'source "$JT_JOB_DIR/env.sh"' in out
    for value in ("wb-s3cr3t", "f4st-m0de", "hello there"):
        assert value not in out


def test_dry_run_submits_nothing_and_never_connects(ip, capsys, far, no_connect) -> None:
    out = dry_run(ip, capsys, "--nodes 2 --name nothing-sent --wait --out should_not_exist")
    assert "#SBATCH --job-name=nothing-sent" in out
    assert no_connect == []
    assert Registry().list() == []
    assert "should_not_exist" not in ip.user_ns
    assert api.connect("far")._transport is None  # no SSH transport was even created


def test_dry_run_on_the_local_tier_shows_the_plan_and_starts_nothing(
    ip, capsys, tmp_path: Path
) -> None:
    out = train(ip, capsys, "--profile local --dry-run --nodes 2 --env TOKEN=t0k3n-value", "print(1)\n")
    assert "local job 'notebook-job': 2 emulated nodes (local[0-1])" in out
    assert "TOKEN" in out and "t0k3n-value" not in out
    assert Registry().list() == []
    jobs = tmp_path / "jupyter-data" / "tiers" / "local-jobs"
    assert not jobs.exists() or not any(p.is_dir() for p in jobs.iterdir())


def test_braces_in_the_line_expand_notebook_variables(ip, capsys, far, no_connect) -> None:
    ip.user_ns.update(n_nodes=3, run_name="exp-7", part="gpu")
    try:
        capsys.readouterr()
        result = ip.run_cell(
            "%%slurm_train --profile far --dry-run --nodes {n_nodes} --name {run_name}-a"
            " --partition {part} --time {n_nodes * 10}\nprint('{run_name}')\n"
        )
        out = capsys.readouterr().out
        result.raise_error()
    finally:
        for key in ("n_nodes", "run_name", "part"):
            ip.user_ns.pop(key, None)
    assert "#SBATCH --nodes=3" in out
    assert "#SBATCH --job-name=exp-7-a" in out
    assert "#SBATCH --partition=gpu" in out
    assert "#SBATCH --time=30" in out


# --- bad input: a short UsageError naming the option, never a traceback ------------------------
BAD_LINES: list[tuple[str, str]] = [
    ("--bogus", "--bogus"),
    ("--nodes abc", "--nodes"),
    ("--nodes 0", "--nodes"),
    ("--ntasks-per-node 0", "--ntasks-per-node"),
    ("--name 'a;b'", "--name"),
    ("--name 'has space'", "--name"),
    ("--env NOEQUALS", "--env"),
    ("--env 1BAD=v", "--env"),
    ("--sbatch --output=x", "--output"),
    ("--sbatch=--job-name=x", "--job-name"),
    ("--sbatch '--comment=a b'", "--comment"),
    ("--sbatch hold", "--sbatch"),
    ("--launcher mpi", "--launcher"),
    ("--out 1abc", "--out"),
    ("--time soon", "--time"),
    ("--mem lots", "--mem"),
    ("--gpus-per-node many", "--gpus-per-node"),
    ("--switches two", "--switches"),
    ("--partition 'a b'", "--partition"),
    ("--constraint 'a b'", "--constraint"),
    ("--python 'my python'", "--python"),
    ("--name \"unbalanced", "closing quotation"),
]


@pytest.mark.parametrize(("line", "named"), BAD_LINES, ids=[c[0] for c in BAD_LINES])
def test_bad_option_is_a_short_usage_error(ip, capsys, far, no_connect, line: str, named: str) -> None:
    message = usage_error(ip, capsys, f"%%slurm_train --profile far {line}\nprint(1)\n")
    assert named in message
    assert "\n" not in message and len(message) < 200, message
    with pytest.raises(UsageError, match=re.escape(named)):
        ip.run_cell_magic("slurm_train", f"--profile far {line}", "print(1)\n")
    assert Registry().list() == []
    assert no_connect == []


@pytest.mark.parametrize("body", ["", "\n", "   \n\t\n"])
def test_empty_cell_is_a_usage_error(ip, capsys, far, body: str) -> None:
    message = usage_error(ip, capsys, f"%%slurm_train --profile far\n{body}")
    assert "empty" in message


def test_unknown_profile_is_a_usage_error_listing_the_known_ones(ip, capsys, far) -> None:
    message = usage_error(ip, capsys, "%%slurm_train --profile nope --dry-run\nprint(1)\n")
    assert "nope" in message and "no such profile" in message
    assert "far" in message and "local" in message
    assert str(far) in message


def test_malformed_tiers_yaml_is_a_usage_error_naming_the_file(
    ip, capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("profiles:\n  hpc: {tier: slurm, host: [unclosed\n")
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    message = usage_error(ip, capsys, "%%slurm_train --dry-run\nprint(1)\n")
    assert str(path) in message and "YAML" in message
    message = usage_error(ip, capsys, "%tiers profiles")
    assert str(path) in message


def test_bad_profile_key_is_a_usage_error_naming_file_and_key(
    ip, capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tiers.yaml"
    path.write_text("profiles:\n  hpc: {tier: slurm, host: h.example, prt: 22}\n")
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    message = usage_error(ip, capsys, "%%slurm_train --profile hpc --dry-run\nprint(1)\n")
    assert str(path) in message and "profiles.hpc.prt" in message and "unknown key" in message


def test_missing_config_file_named_by_the_env_var_is_a_usage_error(
    ip, capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(tmp_path / "missing.yaml"))
    message = usage_error(ip, capsys, "%%slurm_train --dry-run\nprint(1)\n")
    assert "missing.yaml" in message


# --- %tiers ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("bogus", "invalid choice: 'bogus'"),
        ("", "required: command"),
        ("logs", "required: job"),
        ("logs 1 --rank x", "--rank"),
        ("logs 1 --tail -3", "--tail -3: give 0 or more lines"),
        ("jobs --limit x", "--limit"),
        ("logs 999", "JobNotFound"),
        ("cancel 999", "JobNotFound"),
        ("attach 999 --text", "JobNotFound"),
        ('logs "12', "closing quotation"),
    ],
)
def test_tiers_bad_command_is_a_usage_error(ip, capsys, line: str, named: str) -> None:
    message = usage_error(ip, capsys, f"%tiers {line}")
    assert named in message
    with pytest.raises(UsageError):
        ip.run_line_magic("tiers", line)


def test_tiers_help_prints_once_without_error(ip, capsys) -> None:
    capsys.readouterr()
    result = ip.run_cell("%tiers -h")
    captured = capsys.readouterr()
    assert result.error_in_exec is None
    assert captured.out.count("usage: %tiers") == 1
    assert "UsageError" not in captured.err


def test_tiers_profiles_lists_every_profile_and_marks_the_default(ip, capsys, far) -> None:
    out = tiers(ip, capsys, "profiles")
    assert re.search(r"^  far\s+slurm\s+192\.0\.2\.1\s+from .*tiers\.yaml$", out, re.M), out
    assert re.search(r"^\* local\s+local\s+this machine\s+from built-in$", out, re.M), out
    far.write_text(UNREACHABLE_YAML + "default_profile: far\n")
    out = tiers(ip, capsys, "profiles")
    assert re.search(r"^\* far\s+slurm", out, re.M) and re.search(r"^  local\s+local", out, re.M), out


def test_tiers_profiles_shows_where_a_kubernetes_profile_serves(ip, capsys, far) -> None:
    far.write_text(UNREACHABLE_YAML + "  serving: {tier: kubernetes, namespace: alice}\n"
                   "  prod: {tier: k8s, context: prod-inference}\n")
    out = tiers(ip, capsys, "profiles")
    assert re.search(r"^  serving\s+kubernetes kubeconfig context, namespace alice\s+from ", out, re.M), out
    assert re.search(r"^  prod\s+kubernetes prod-inference\s+from ", out, re.M), out
    columns = {line.index(" from ") for line in out.splitlines()}
    assert len(columns) == 1, out  # still aligned


def test_tiers_profiles_shows_a_profile_description_under_it(ip, capsys, far) -> None:
    far.write_text(UNREACHABLE_YAML + "  gpu:\n    tier: slurm\n    host: 192.0.2.2\n"
                   "    description: |\n      A100 partition;\n      ask Ana for access\n")
    out = tiers(ip, capsys, "profiles")
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if re.match(r"^  gpu\s+slurm", line))
    assert lines[at + 1] == "    A100 partition; ask Ana for access", out
    assert not any(line.startswith("    ") for line in lines if "far" in line), out


def test_tiers_profiles_without_any_config_shows_the_builtin_local(ip, capsys, monkeypatch) -> None:
    monkeypatch.setattr("jupyter_tiers.config.profiles.sbatch_here", lambda: False)
    out = tiers(ip, capsys, "profiles")
    assert re.fullmatch(r"\* local\s+local\s+this machine\s+from built-in\n", out), out


def test_tiers_profiles_on_a_slurm_machine_shows_the_builtin_cluster(ip, capsys, monkeypatch) -> None:
    monkeypatch.setattr("jupyter_tiers.config.profiles.sbatch_here", lambda: True)
    out = tiers(ip, capsys, "profiles")
    assert re.match(r"  cluster\s+slurm\s+this machine\s+from built-in\n", out), out


@pytest.mark.local_procs
def test_tiers_jobs_prints_a_table(ip, capsys) -> None:
    assert tiers(ip, capsys, "jobs").strip() == "no jobs yet"
    train(ip, capsys, "--profile local --nodes 2 --name table-a --wait", "print('a')\n")
    train(ip, capsys, "--profile local --name table-b --wait", "print('b')\n")
    out = tiers(ip, capsys, "jobs")
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "KIND", "NAME", "PROFILE", "TIER", "STATE", "SIZE", "WHERE",
                                "STARTED"]
    rows = [ln.split() for ln in lines[1:]]
    assert [r[2] for r in rows] == ["table-b", "table-a"]  # newest first
    assert rows[1][1:8] == ["job", "table-a", "local", "local", "COMPLETED", "2", "local[0-1]"]
    assert rows[0][1:8] == ["job", "table-b", "local", "local", "COMPLETED", "1", "local0"]
    assert len(tiers(ip, capsys, "jobs --limit 1").splitlines()) == 2
    assert tiers(ip, capsys, "jobs --profile elsewhere").strip() == "no jobs yet"


# --- the local tier (no cluster) ---------------------------------------------------------------
@pytest.mark.local_procs
def test_local_wait_streams_ranks_and_ends_with_the_summary(ip, capsys) -> None:
    body = "import os\nprint('hello from rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'])\n"
    out = train(ip, capsys, "--profile local --nodes 2 --wait", body)
    assert out.splitlines()[0].startswith("job ") and "submitted to local: 2 ranks" in out
    assert "0: hello from rank 0 of 2\n" in out
    assert "1: hello from rank 1 of 2\n" in out
    match = SUMMARY_OK.match(last_line(out))
    assert match and match.group(2) == "local[0-1]", out
    assert Registry().get(match.group(1)).state == "COMPLETED"


@pytest.mark.local_procs
def test_local_is_the_default_profile_when_nothing_is_configured(ip, capsys) -> None:
    out = train(ip, capsys, "--nodes 2 --wait --name no-profile", "print('ok')\n")
    assert SUMMARY_OK.match(last_line(out)), out
    (record,) = Registry().list()
    assert (record.profile, record.tier, record.name) == ("local", "local", "no-profile")


@pytest.mark.local_procs
def test_local_without_wait_returns_at_once_with_a_handle(ip, capsys) -> None:
    out = train(ip, capsys, "--profile local --nodes 2 --out bg_job --name background", SLEEPER)
    job = ip.user_ns.pop("bg_job")
    assert isinstance(job, Job)
    assert out.strip() == (
        f"job {job.id} (background) submitted to local: 2 ranks — follow it with %tiers attach {job.id}"
    )
    assert not job.status().state.terminal
    job.cancel()
    assert job.wait(timeout=GUARD).state is JobState.CANCELLED


@pytest.mark.local_procs
def test_local_failing_rank_is_named_in_the_summary(ip, capsys) -> None:
    body = textwrap.dedent(
        """\
        import os, sys, time
        if os.environ["RANK"] == "1":
            time.sleep(0.5)
            sys.exit(3)
        time.sleep(300)
        """
    )
    out = train(ip, capsys, "--profile local --nodes 2 --wait", body)
    match = SUMMARY_FAILED.match(last_line(out))
    assert match, out
    assert match.groups()[1:] == ("1", "local1", "3", "1")


@pytest.mark.local_procs
def test_local_logs_attach_and_out(ip, capsys) -> None:
    body = "import os\nr = os.environ['RANK']\nfor i in range(3):\n    print(f'rank {r} line {i}')\n"
    out = train(ip, capsys, "--profile local --nodes 2 --wait --out job", body)
    job = ip.user_ns.pop("job")
    match = SUMMARY_OK.match(last_line(out))
    assert isinstance(job, Job) and match and match.group(1) == job.id, out
    assert tiers(ip, capsys, f"logs {job.id} --rank 1") == "rank 1 line 0\nrank 1 line 1\nrank 1 line 2\n"
    assert tiers(ip, capsys, f"logs {job.id} --rank 0 --tail 1") == "rank 0 line 2\n"
    merged = job.logs()
    assert tiers(ip, capsys, f"logs {job.id}") == merged
    assert tiers(ip, capsys, f"logs {job.id} --tail 2") == "".join(merged.splitlines(keepends=True)[-2:])
    attached = tiers(ip, capsys, f"attach {job.id} --wait --text")
    assert last_line(attached) == last_line(out)
    assert "0: rank 0 line 2" in attached  # the log is replayed from the start
    attached = tiers(ip, capsys, f"attach local/{job.id} --wait")  # display=text from the env
    assert last_line(attached) == last_line(out)


@pytest.mark.local_procs
def test_local_cancel_by_id(ip, capsys) -> None:
    train(ip, capsys, "--profile local --nodes 2 --out sleeper --name sleeper", SLEEPER)
    job = ip.user_ns.pop("sleeper")
    wait_for(lambda: job.status().state is JobState.RUNNING, "the job to run")
    assert tiers(ip, capsys, f"cancel {job.id}").strip() == f"cancel requested for job {job.id} (sleeper)"
    assert job.wait(timeout=GUARD).state is JobState.CANCELLED
    row = tiers(ip, capsys, "jobs").splitlines()[1].split()
    assert row[:6] == [job.id, "job", "sleeper", "local", "local", "CANCELLED"]


def check_same_name_attaches(ip, capsys, profile: str) -> None:
    line = f"--profile {profile} --name keep-one"
    first_out = train(ip, capsys, f"{line} --out first", SLEEPER)
    first = ip.user_ns.pop("first")
    assert f"job {first.id} (keep-one) submitted to {profile}" in first_out
    again = train(ip, capsys, f"{line} --out second", SLEEPER)
    second = ip.user_ns.pop("second")
    assert second.id == first.id
    # (Slurm shows a starting job CONFIGURING a moment, as test_cancel and the handoff tests allow)
    assert re.match(rf"job {first.id} \(keep-one\) is still (PENDING|CONFIGURING|RUNNING): attached to it",
                    again), again
    assert [r.job_id for r in Registry().list()] == [first.id]
    train(ip, capsys, f"{line} --resubmit --out third", SLEEPER)
    third = ip.user_ns.pop("third")
    assert third.id != first.id
    assert sorted(r.job_id for r in Registry().list()) == sorted([first.id, third.id])
    for job in (first, third):
        job.cancel()
    for job in (first, third):
        assert job.wait(timeout=GUARD).state is JobState.CANCELLED
    # Once the job with that name ended, the same cell submits a new one.
    train(ip, capsys, f"{line} --out fourth", "print('again')\n")
    fourth = ip.user_ns.pop("fourth")
    assert fourth.id not in (first.id, third.id)
    assert fourth.wait(timeout=GUARD).state is JobState.COMPLETED


@pytest.mark.local_procs
def test_local_same_name_attaches_and_resubmit_submits_another(ip, capsys) -> None:
    check_same_name_attaches(ip, capsys, "local")


@pytest.mark.local_procs
def test_local_env_values_reach_the_job_but_are_never_stored(ip, capsys) -> None:
    body = "import os\nprint(os.environ['TOKEN'] == 's3cr3t value', os.environ['EMPTY'] == '')\n"
    out = train(ip, capsys, "--profile local --wait --out job -e 'TOKEN=s3cr3t value' -e EMPTY=", body)
    job = ip.user_ns.pop("job")
    assert "0: True True" in out
    assert "s3cr3t" not in out
    record = Registry().get(job.id)
    assert "s3cr3t" not in record.script and "s3cr3t" not in repr(record.spec)


# --- the Slurm test cluster --------------------------------------------------------------------
@pytest.mark.cluster
class TestCluster:
    def test_wait_streams_rank_lines_and_ends_with_the_summary(self, ip, capsys, box: str) -> None:
        body = textwrap.dedent(
            """\
            import os
            print(f"hello from rank {os.environ['RANK']} on {os.environ['SLURMD_NODENAME']}")
            print(f"bye from rank {os.environ['RANK']}")
            """
        )
        out = train(ip, capsys, f"--profile {box} --nodes 2 --wait --out job --name magic-two", body)
        job = ip.user_ns.pop("job")
        assert isinstance(job, Job)
        match = SUMMARY_OK.match(last_line(out))
        assert match, out
        assert match.group(1) == job.id
        nodes = re.findall(r"^(\d): hello from rank \1 on (node\d+)$", out, re.M)
        assert sorted(r for r, _ in nodes) == ["0", "1"], out
        assert len({n for _, n in nodes}) == 2  # one rank per node
        assert re.search(r"^0: bye from rank 0$", out, re.M) and re.search(r"^1: bye from rank 1$", out, re.M)
        assert job.status().state is JobState.COMPLETED

        node1 = dict(nodes)["1"]
        assert tiers(ip, capsys, f"logs {job.id} --rank 1") == (
            f"hello from rank 1 on {node1}\nbye from rank 1\n"
        )
        merged = job.logs()
        tail = tiers(ip, capsys, f"logs {job.id} --tail 2")
        assert len(tail.splitlines()) == 2 and tail == "".join(merged.splitlines(keepends=True)[-2:])

        attached = tiers(ip, capsys, f"attach {job.id} --wait --text")
        assert last_line(attached) == last_line(out)

    def test_failing_rank_is_named_and_the_others_stopped(self, ip, capsys, box: str) -> None:
        body = textwrap.dedent(
            """\
            import os, sys, time
            print("up", flush=True)
            up = os.path.join(os.environ["JT_JOB_DIR"], "up")
            os.makedirs(up, exist_ok=True)
            open(os.path.join(up, os.environ["RANK"]), "w").close()
            if os.environ["RANK"] == "1":  # fail once every rank is up: 3 started ranks to stop
                for _ in range(1200):
                    if len(os.listdir(up)) == 4:
                        break
                    time.sleep(0.1)
                sys.exit(3)
            time.sleep(300)
            """
        )
        out = train(ip, capsys, f"--profile {box} --nodes 2 --ntasks-per-node 2 --wait", body)
        match = SUMMARY_FAILED.match(last_line(out))
        assert match, out
        _, rank, node, code, stopped = match.groups()
        assert (rank, code, stopped) == ("1", "3", "3")
        assert re.fullmatch(r"node\d+", node)

    def test_cancel_a_sleeping_job_by_id(self, ip, capsys, box: str) -> None:
        out = train(ip, capsys, f"--profile {box} --out sleeper --name magic-sleeper", SLEEPER)
        job = ip.user_ns.pop("sleeper")
        assert out.strip().endswith(f"follow it with %tiers attach {job.id}")
        wait_for(lambda: "sleeping" in job.logs(rank=0), "the job to start sleeping")
        assert tiers(ip, capsys, f"cancel {job.id}").strip() == (
            f"cancel requested for job {job.id} (magic-sleeper)"
        )
        assert job.wait(timeout=GUARD).state is JobState.CANCELLED
        assert job.status().state is JobState.CANCELLED
        row = tiers(ip, capsys, "jobs").splitlines()[1].split()
        assert row[:6] == [job.id, "job", "magic-sleeper", box, "slurm", "CANCELLED"]

    def test_same_name_attaches_and_resubmit_submits_another(self, ip, capsys, box: str) -> None:
        check_same_name_attaches(ip, capsys, box)


def test_a_bad_profile_default_is_blamed_on_the_profile_file(ip, capsys, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "tiers.yaml"
    path.write_text("profiles:\n  lab:\n    tier: local\n    defaults: {time: 'soon'}\n")
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    message = usage_error(ip, capsys, "%%slurm_train --profile lab --dry-run\nprint(1)\n")
    assert message.startswith(f"{path}: profiles.lab.defaults.time: 'soon' is not allowed")
    assert "--time" not in message


def test_bare_env_name_passes_the_kernels_value_without_printing_it(
    ip, capsys, far, no_connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIERS_TEST_TOKEN", "s3cret-from-the-kernel")
    out = dry_run(ip, capsys, "--profile far --env TIERS_TEST_TOKEN")
    assert "TIERS_TEST_TOKEN" in out and "s3cret-from-the-kernel" not in out
    from jupyter_tiers.faces.magics import parse_env

    assert parse_env(["TIERS_TEST_TOKEN", "A=1"]) == (("TIERS_TEST_TOKEN", "s3cret-from-the-kernel"),
                                                   ("A", "1"))
    monkeypatch.delenv("TIERS_TEST_TOKEN")
    message = usage_error(ip, capsys, "%%slurm_train --profile far --dry-run --env TIERS_TEST_TOKEN\nx\n")
    assert message.startswith("--env TIERS_TEST_TOKEN: not set in the kernel's environment")


def test_tiers_jobs_says_once_that_the_notebook_runs_inside_a_slurm_job(ip, capsys, monkeypatch) -> None:
    from jupyter_tiers.app import items as service

    monkeypatch.setattr(service, "_noted_inside", threading.Event())
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURMD_NODENAME", "c17")
    first = tiers(ip, capsys, "jobs")
    assert first.splitlines()[0].startswith("this notebook runs inside Slurm job 4242 on node c17;")
    assert "inside Slurm job" not in tiers(ip, capsys, "jobs")  # once per kernel
    monkeypatch.setattr(service, "_noted_inside", threading.Event())
    monkeypatch.delenv("SLURM_JOB_ID")
    assert "inside Slurm job" not in tiers(ip, capsys, "jobs")  # not inside a job: nothing
