"""Issue 16 §5: the JobView Files tab's kernel side on the local tier: the front end's
``files`` message lists what the job left, ``download`` saves one file into the notebook's
directory with progress in ``downloads``; a name that was never listed is ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_tiers.core.model import JobState
from jupyter_tiers.local.tier import LocalTier
from tests.helpers import wait_for
from tests.local.conftest import QuietView

BODY = """\
import pathlib
pathlib.Path("out").mkdir()
pathlib.Path("out/loss.csv").write_text("step,loss\\n1,0.5\\n")
"""


def test_files_tab_lists_and_downloads(tier: LocalTier, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    nb = tmp_path / "nb"
    nb.mkdir()
    monkeypatch.chdir(nb)
    job = tier.submit(tier.make_spec(BODY, name="files-tab"))
    assert job.wait(timeout=120).state is JobState.COMPLETED, job.logs()
    view = QuietView(job)
    try:
        view._on_front_end_msg(view, {"kind": "files"}, None)
        rows = wait_for(lambda: view.files, "the file listing")
        by_name = {r[0]: r for r in rows}
        assert by_name["out/loss.csv"][1] == len("step,loss\n1,0.5\n") and by_name["out/loss.csv"][2] > 0
        assert view.files_note == ""
        # Issue 29 §11: the job's output first, jupyter-tiers' own files (group "tiers") last.
        # Issue 41 item 11: the cell (main.py) is the user's, listed with the outputs.
        assert [r[0] for r in rows[:2]] == ["main.py", "out/loss.csv"], rows
        assert rows[0][3] == rows[1][3] == "output", rows
        groups = [r[3] for r in rows]
        assert "tiers" in groups and groups == sorted(groups, key=["output", "checkpoints", "log",
                                                                   "tiers"].index), rows
        assert {"rank.sh", "state.json"} <= {r[0] for r in rows if r[3] == "tiers"}, rows
        view._on_front_end_msg(view, {"kind": "download", "name": "out/loss.csv"}, None)
        wait_for(lambda: view.downloads.get("out/loss.csv", "").startswith("saved"), "the download")
        assert view.downloads["out/loss.csv"] == "saved to out/loss.csv"
        assert (nb / "out/loss.csv").read_text() == "step,loss\n1,0.5\n"
        view.files_pane.download("../../etc/passwd")  # never listed: nothing happens
        assert "../../etc/passwd" not in view.downloads
    finally:
        view.close()


def test_files_tab_never_keeps_or_replaces_an_old_file_silently(tier: LocalTier, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29 §1: a local out/loss.csv of the same size but another run's content: the row says
    the job's file was saved under a new name; Replace (overwrite) replaces it and says so."""
    nb = tmp_path / "nb"
    (nb / "out").mkdir(parents=True)
    (nb / "out/loss.csv").write_text("step,loss\n1,0.9\n")  # same size as the job's
    monkeypatch.chdir(nb)
    job = tier.submit(tier.make_spec(BODY, name="files-tab-old"))
    assert job.wait(timeout=120).state is JobState.COMPLETED, job.logs()
    view = QuietView(job)
    try:
        view._on_front_end_msg(view, {"kind": "files"}, None)
        wait_for(lambda: view.files, "the file listing")
        view._on_front_end_msg(view, {"kind": "download", "name": "out/loss.csv"}, None)
        wait_for(lambda: view.downloads.get("out/loss.csv", "").startswith("saved"), "the download")
        assert view.downloads["out/loss.csv"] == ("saved as out/loss (1).csv "
                                                  "(out/loss.csv here has other content)")
        assert (nb / "out/loss.csv").read_text() == "step,loss\n1,0.9\n"
        assert (nb / "out/loss (1).csv").read_text() == "step,loss\n1,0.5\n"
        view._on_front_end_msg(view, {"kind": "download", "name": "out/loss.csv", "overwrite": True}, None)
        wait_for(lambda: view.downloads.get("out/loss.csv", "").startswith("replaced"), "the replace")
        assert (nb / "out/loss.csv").read_text() == "step,loss\n1,0.5\n"
        view._on_front_end_msg(view, {"kind": "download", "name": "out/loss.csv"}, None)
        wait_for(lambda: view.downloads.get("out/loss.csv", "").startswith("already"), "the check")
        assert view.downloads["out/loss.csv"] == "already up to date (same sha256)"
    finally:
        view.close()
