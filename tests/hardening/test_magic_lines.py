"""Issue 9, finding 4 and bad input on magic lines: --env values reach the job literally (no
IPython $name/{var} expansion in them, while {var} still works elsewhere), values are never echoed,
and oversized or absurd numbers are one-line UsageErrors."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_tiers.faces.magics import MAX_LINE, expand_words
from tests.helpers import cancel_registered_jobs, isolate_tiers, tiers_shell


@pytest.fixture(scope="module")
def ip() -> InteractiveShell:
    return tiers_shell()


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    isolate_tiers(tmp_path, monkeypatch)
    yield
    cancel_registered_jobs()


# --- expand_words (pure) ---------------------------------------------------------------------

NS = {"word": "EXPANDED", "name": "run7", "n": 3, "cfg": {"nodes": 2}}


@pytest.mark.parametrize("line, words", [
    ("--env P=pa$word --name {name}", ["--env", "P=pa$word", "--name", "run7"]),
    ("-e P={name} --nodes {n}", ["-e", "P={name}", "--nodes", "3"]),
    ("--env=P=$word -eQ={word}", ["--env=P=$word", "-eQ={word}"]),
    ("--nodes {cfg['nodes']} --name $name", ["--nodes", "2", "--name", "run7"]),
    ("--env 'A=x y $word' --name a", ["--env", "A=x y $word", "--name", "a"]),
    ("--name {missing}", ["--name", "{missing}"]),  # as IPython: a line that does not format stays
])
def test_env_values_are_not_expanded(line: str, words: list[str]) -> None:
    assert expand_words(line, "%%slurm_train", NS) == words


def test_no_namespace_means_no_expansion() -> None:
    words = expand_words("--name {name} --env A=$word", "%%x", None)
    assert words == ["--name", "{name}", "--env", "A=$word"]


def test_overlong_lines_refused() -> None:
    with pytest.raises(UsageError, match=f"at most {MAX_LINE}"):
        expand_words("--name " + "x" * MAX_LINE, "%%slurm_train", NS)
    with pytest.raises(UsageError, match="once notebook variables are expanded"):
        expand_words("--name {big}", "%%slurm_train", {"big": "x" * (MAX_LINE + 1)})


# --- through IPython ------------------------------------------------------------------------

@pytest.mark.local_procs
def test_env_value_with_dollar_reaches_a_local_job_literally(ip: InteractiveShell,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    ip.user_ns["word"] = "EXPANDED"
    ip.user_ns["jobname"] = "literal-env"
    body = "import os\nprint('P is', os.environ['P'], 'Q is', os.environ['Q'])\n"
    ip.run_cell_magic("slurm_train", "--env P=pa$word --env Q={jobname} --name {jobname} --wait", body)
    out = capsys.readouterr().out
    assert "P is pa$word Q is {jobname}" in out
    assert "COMPLETED" in out


@pytest.mark.parametrize("line, needle", [
    ("jobs --limit 100000000000000000000", "at most 1,000,000"),
    ("jobs --limit 1e20", "not a whole number"),
    ("logs 1 --tail 100000000000000000000000", "at most 100,000,000"),
    ("logs 1 --rank 99999999999999999999", "at most 1,000,000"),
    ("scale svc 10000000000000000000", "at most 100,000"),
])
def test_huge_numbers_in_tiers_are_usage_errors(ip: InteractiveShell, line: str, needle: str) -> None:
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("tiers", line)
    assert needle in str(info.value)


def test_tiers_jobs_any_limit_lists(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("tiers", "jobs --limit 1000000")
    assert "no jobs yet" in capsys.readouterr().out


def test_tiers_still_expands_variables(ip: InteractiveShell) -> None:
    ip.user_ns["some_id"] = "424242"
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("tiers", "cancel {some_id}")
    assert "424242" in str(info.value)


@pytest.mark.parametrize("line", ["--env TOKEN=s3cr3t$x --nodes abc",
                                  "--env TOKEN=s3cr3t --time 99999999999999",
                                  "--env TOKEN=s3cr3t --env RANK=s3cr3t", "--env=TOKEN:s3cr3t"])
def test_env_values_never_in_errors(ip: InteractiveShell, line: str) -> None:
    with pytest.raises(UsageError) as info:
        ip.run_cell_magic("slurm_train", line, "print(1)\n")
    assert "s3cr3t" not in str(info.value)


def test_lone_surrogate_from_the_kernel_environment(ip: InteractiveShell,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BAD_BYTES", os.fsdecode(b"abc\xff"))
    with pytest.raises(UsageError) as info:
        ip.run_cell_magic("slurm_train", "--env BAD_BYTES --dry-run", "print(1)\n")
    assert "--env BAD_BYTES" in str(info.value) and "UTF-8" in str(info.value)


@pytest.mark.parametrize("line, needle", [
    ("--sbatch=--", "'--' is not a value"), ("--name=--", "'--' is not a value"),
    ("--profile=--", "'--' is not a value"), ("--out __builtins__", "--out"), ("--out class", "--out"),
    ("--name 'job\n'", "--name"), ("--env RANK=0", "reserved"), ("--env PATH=/x", "reserved"),
    ("--sbatch=--open-m=truncate", "--open-mode"),
    ("--python ~/venv/bin/python --dry-run --time 1e9", "--time"),
])
def test_bad_lines_are_one_line_usage_errors(ip: InteractiveShell, line: str, needle: str) -> None:
    with pytest.raises(UsageError) as info:
        ip.run_cell_magic("slurm_train", line, "print(1)\n")
    assert needle in str(info.value)
    assert "Traceback" not in str(info.value)


def test_tilde_python_dry_run(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell_magic("slurm_train", "--python ~/venv/bin/python --dry-run", "print(1)\n")
    assert "venv/bin/python" in capsys.readouterr().out


def test_lone_surrogate_for_a_service_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from jupyter_tiers.faces.magics import parse_env

    with pytest.raises(UsageError, match="--env BAD_BYTES: the kernel's value is not valid UTF-8"):
        parse_env(["BAD_BYTES"], {"BAD_BYTES": os.fsdecode(b"abc\xff")})
    assert parse_env(["OK"], {"OK": "ÜBER"}) == (("OK", "ÜBER"),)
