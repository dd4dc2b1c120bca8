"""The %%slurm_train guard's warning says what really happens to the cell: under --dry-run
nothing is submitted; otherwise the job is submitted anyway; attached to a live job of that name,
nothing is submitted and nothing is warned."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from jupyter_tiers.config import profiles as config
from jupyter_tiers.config.registry import Registry
from tests.helpers import cancel_registered_jobs, ipython_test_shell

VENV_BIN = Path(sys.executable).parent
# A server shape the guard sees, that ends at once when run (the branch is never taken).
SERVER_BODY = ("import http.server, sys\nif len(sys.argv) > 5:\n"
               "    http.server.HTTPServer(('', 8000), None).serve_forever()\nprint('ended')\n")


@pytest.fixture(scope="module")
def ip() -> InteractiveShell:
    shell = ipython_test_shell()
    shell.run_line_magic("load_ext", "jupyter_tiers")
    return shell


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Only the built-in local profile, jobs under tmp_path, text display."""
    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "no-system-tiers.yaml")
    monkeypatch.setattr(config, "USER_PATH", tmp_path / "no-user-tiers.yaml")
    monkeypatch.delenv("JUPYTER_TIERS_CONFIG", raising=False)
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter-data"))
    monkeypatch.setenv("JUPYTER_TIERS_DISPLAY", "text")
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.chdir(tmp_path)
    yield
    cancel_registered_jobs()


def _warnings(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("%%slurm_train warning:")]


def test_dry_run_says_nothing_was_submitted(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    ip.run_cell_magic("slurm_train", "--name srv --dry-run", SERVER_BODY)
    err = capsys.readouterr().err
    (warning,) = _warnings(err)
    assert "Nothing submitted (--dry-run)" in warning and "Submitted anyway" not in warning
    assert "--force" in warning
    assert Registry().list(limit=10) == []  # indeed nothing submitted


@pytest.mark.local_procs
def test_a_real_run_says_submitted_anyway_and_an_attach_warns_nothing(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    ip.run_cell_magic("slurm_train", "--name srv2 --wait", SERVER_BODY)
    captured = capsys.readouterr()
    (warning,) = _warnings(captured.err)
    assert warning.endswith("Submitted anyway (--force silences this)")
    assert "COMPLETED" in captured.out, captured.out
    assert [r.name for r in Registry().list(limit=10)] == ["srv2"]
    # A live job of that name: the cell attaches to it, submits nothing and so warns nothing.
    sleeper = SERVER_BODY.replace("print('ended')", "import time; time.sleep(600)")
    ip.run_cell_magic("slurm_train", "--name srv3", sleeper)
    assert len(_warnings(capsys.readouterr().err)) == 1
    ip.run_cell_magic("slurm_train", "--name srv3", sleeper)
    captured = capsys.readouterr()
    assert "attached to it" in captured.out, captured.out
    assert _warnings(captured.err) == []
    assert sorted(r.name for r in Registry().list(limit=10)) == ["srv2", "srv3"]
