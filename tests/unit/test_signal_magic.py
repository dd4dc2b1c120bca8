"""%%slurm_train --signal: rendered for a slurm profile (dry run, nothing sent), named as not
applied on the local tier, and bad values are one short UsageError (no traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from tests.helpers import cancel_registered_jobs, isolate_tiers, tiers_shell
from tests.magics.test_magics import UNREACHABLE_YAML, usage_error


@pytest.fixture(scope="module")
def ip() -> InteractiveShell:
    return tiers_shell()


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    isolate_tiers(tmp_path, monkeypatch)
    path = tmp_path / "tiers.yaml"
    path.write_text(UNREACHABLE_YAML)
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    yield
    cancel_registered_jobs()


def _train(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], line: str) -> str:
    capsys.readouterr()
    ip.run_cell_magic("slurm_train", line, "print('hi')\n")
    return capsys.readouterr().out


def test_dry_run_renders_the_signal_and_the_restart_lines(ip, capsys) -> None:
    out = _train(ip, capsys, "--profile far --dry-run --nodes 2 --requeue --signal b:usr1@90")
    assert "#SBATCH --signal=B:USR1@90" in out and "#SBATCH --requeue" in out
    assert "trap 'scancel --signal=USR1" in out and "— restart %s —" in out


def test_local_tier_names_it_as_not_applied(ip, capsys) -> None:
    out = _train(ip, capsys, "--profile local --dry-run --signal USR1@60")
    assert "Not applied locally: " in out and "signal=USR1@60" in out


@pytest.mark.parametrize(("value", "says"), [
    ("KILL@60", "KILL cannot be caught"),
    ("USR1@99999", "more than Slurm's 65535"),
    ("'USR1@1;id'", "is not allowed"),
])
def test_bad_signal_is_a_short_usage_error(ip, capsys, value: str, says: str) -> None:
    message = usage_error(ip, capsys, f"%%slurm_train --profile far --dry-run --signal {value}\nprint(1)\n")
    assert "signal" in message and says in message and "\n" not in message.strip()
