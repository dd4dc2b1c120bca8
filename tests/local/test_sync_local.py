"""Issue 16 §4 on the local tier: --sync copies the notebook's directory into the job, whose
ranks import a module beside the notebook and read its files; ignore rules, the size cap and
--dry-run through the real magic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from jupyter_tiers.config.registry import Registry
from tests.helpers import cancel_registered_jobs, isolate_tiers, tiers_shell

BODY = """\
import os, mymodel
print("value", mymodel.VALUE, "config", open("conf/run.txt").read().strip())
print("cwd-is-copy", os.getcwd().endswith("/code"))
"""


@pytest.fixture
def ip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    isolate_tiers(tmp_path, monkeypatch)
    nb = tmp_path / "nb"
    (nb / "conf").mkdir(parents=True)
    (nb / "mymodel.py").write_text("VALUE = 41\n")
    (nb / "conf/run.txt").write_text("lr=0.1\n")
    (nb / ".gitignore").write_text("*.ckpt\nscratch/\n")
    (nb / "old.ckpt").write_bytes(b"x" * 1000)
    (nb / "scratch").mkdir()
    (nb / "scratch/tmp.py").write_text("")
    monkeypatch.chdir(nb)
    yield tiers_shell()
    cancel_registered_jobs()


def run(ip: Any, capsys: pytest.CaptureFixture[str], line: str, body: str = BODY) -> str:
    capsys.readouterr()
    ip.run_cell_magic("slurm_train", line, body)
    return capsys.readouterr().out


def last_jobdir() -> Path:
    return Path(Registry().list(limit=1)[0].jobdir)


def test_module_beside_the_notebook_is_imported(ip: Any, capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    run(ip, capsys, "--sync . --name synced --nodes 2 --wait")
    jobdir = last_jobdir()
    log = (jobdir / "job.log").read_text()
    assert "0: value 41 config lr=0.1" in log and "1: value 41 config lr=0.1" in log
    assert "0: cwd-is-copy True" in log
    code = jobdir / "code"
    assert sorted(p.relative_to(code).as_posix() for p in code.rglob("*") if p.is_file()) == [
        ".gitignore", "conf/run.txt", "mymodel.py"]
    # A copy: editing the notebook's module changes the next job, not this one's files.
    (tmp_path / "nb/mymodel.py").write_text("VALUE = 42\n")
    assert (code / "mymodel.py").read_text() == "VALUE = 41\n"
    run(ip, capsys, "--sync . --name synced-2 --wait")
    assert "0: value 42 " in (last_jobdir() / "job.log").read_text()


def test_without_sync_nothing_is_copied(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run(ip, capsys, "--name plain --wait", "import os\nprint('cwd', os.getcwd())\n")
    jobdir = last_jobdir()
    assert not (jobdir / "code").exists()
    assert f"0: cwd {jobdir}" in (jobdir / "job.log").read_text()


def test_dry_run_lists_files_and_size(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(ip, capsys, "--sync . --sync conf --dry-run")
    assert "# --sync . conf: 3 files, 0.0 MB" in out
    assert "#   mymodel.py  (11 bytes)" in out
    assert "old.ckpt" not in out and "scratch" not in out
    assert 'cd -- "$JT_SYNC_DIR"' in out
    assert Registry().list(limit=5) == []


def test_size_refusal_is_one_line(ip: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "nb/weights.bin").write_bytes(b"\0" * 2_500_000)
    # The user's own file (named in $JUPYTER_TIERS_CONFIG): sync_max_mb is never a project file's
    own = tmp_path / "own-tiers.yaml"
    own.write_text("profiles:\n  local:\n    tier: local\n    sync_max_mb: 2\n")
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(own))
    with pytest.raises(UsageError) as err:
        ip.run_cell_magic("slurm_train", "--sync . --name big", BODY)
    msg = str(err.value)
    assert "\n" not in msg and "over the 2 MB limit" in msg and "weights.bin (2.5 MB)" in msg
    assert Registry().list(limit=5) == []


@pytest.mark.parametrize(("line", "wanted"), [
    ("--sync /etc", "--sync: '/etc': give a path relative to the notebook's directory"),
    ("--sync ../x", "leaves the notebook's directory"),
    ("--sync missing", "--sync missing: no such file or directory"),
])
def test_bad_paths_refused(ip: Any, line: str, wanted: str) -> None:
    with pytest.raises(UsageError, match=None) as err:
        ip.run_cell_magic("slurm_train", f"{line} --name bad", BODY)
    assert wanted in str(err.value)


def test_array_tasks_share_one_copy(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run(ip, capsys, "--sync . --name swept --sweep 'lr=1,2' --wait",
        "import mymodel\nprint('task', params['lr'], mymodel.VALUE)\n")
    arraydir = last_jobdir()
    assert (arraydir / "code/mymodel.py").read_text() == "VALUE = 41\n"
    logs = sorted((arraydir / "tasks").glob("*/job.log"))
    assert len(logs) == 2
    assert {next(x for x in p.read_text().splitlines() if "task" in x) for p in logs} == {
        "0: task 1 41", "0: task 2 41"}
