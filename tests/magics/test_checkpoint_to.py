"""``--checkpoint-to`` on ``%%slurm_train``: a valid URI or ``store`` (which needs the profile's
object_store) is accepted and shown by --dry-run; anything else is one UsageError naming the
option. Nothing is submitted (--dry-run)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from tests.helpers import isolate_tiers, tiers_shell


@pytest.fixture
def ip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    isolate_tiers(tmp_path, monkeypatch)
    path = tmp_path / "tiers.yaml"
    path.write_text(textwrap.dedent(f"""\
        profiles:
          plain: {{tier: local, workdir: {tmp_path / "a"}}}
          stored:
            tier: local
            workdir: {tmp_path / "b"}
            object_store: {{bucket: team-ckpt, prefix: jt}}
            defaults: {{checkpoint_to: store}}
        """))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    return tiers_shell()


def refusal(ip, capsys: pytest.CaptureFixture[str], line: str) -> str:  # type: ignore[no-untyped-def]
    capsys.readouterr()
    result = ip.run_cell(f"%%slurm_train {line} --dry-run\nprint(1)\n")
    captured = capsys.readouterr()
    assert isinstance(result.error_in_exec, UsageError), (result.error_in_exec, captured.out)
    assert "Traceback" not in captured.out + captured.err
    return str(result.error_in_exec)


@pytest.mark.parametrize("line, says", [
    ("--profile plain --checkpoint-to store", "the profile has no object_store"),
    ("--profile plain --checkpoint-to s3://Team/x", "lower-case letters"),
    ("--profile plain --checkpoint-to /scratch/x", "not an s3:// URI"),
    ("--profile plain --checkpoint-to 's3://team-ckpt/a b'", "letters, digits"),
    ("--profile stored --array 0-3 --checkpoint-dir /scratch/shared", "every task shares"),
])
def test_bad_checkpoint_to_is_one_usage_error_naming_the_option(ip, capsys: pytest.CaptureFixture[str],  # type: ignore[no-untyped-def]
                                                                line: str, says: str) -> None:
    message = refusal(ip, capsys, line)
    assert "checkpoint-to" in message and says in message and "\n" not in message


def test_store_from_the_profiles_defaults_and_an_explicit_uri_are_accepted(  # type: ignore[no-untyped-def]
        ip, capsys: pytest.CaptureFixture[str]) -> None:
    for line in ("--profile stored", "--profile plain --checkpoint-to s3://team-ckpt/jt/",
                 "--profile stored --array 0-3"):
        capsys.readouterr()
        result = ip.run_cell(f"%%slurm_train {line} --dry-run\nprint(1)\n")
        assert result.error_in_exec is None, result.error_in_exec
