"""Stacks, grouped, on the local tier (real supervisor, rank shims and ranks): a 2 x 2 job whose
even ranks block in one function and odd ranks in another shows both stacks with the ranks
grouped, through ``job.stacks()``, ``%tiers stacks``, ``jupyter tiers stacks`` and the
JobView's Stacks button; a rank that has exited says so. No timed assertions: every wait is for
a file or a state."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from jupyter_tiers import api
from jupyter_tiers.core.model import JobState, RankPhase
from jupyter_tiers.faces import cli, tiers_command
from tests.helpers import wait_for
from tests.local.conftest import QuietView

GUARD = 300.0
# Every rank blocks at one line (a sleep the test never waits out; the job is cancelled at the
# end), so ranks in the same place have the same stack whatever moment they are asked.
BODY = textwrap.dedent("""\
    import os, sys, threading, time
    rank = int(os.environ["RANK"])
    here = os.environ["JT_JOB_DIR"]
    def mark():
        open(os.path.join(here, f"up-{rank}"), "w").close()
    def load_batches():
        time.sleep(3600)
    def all_reduce():
        mark()
        time.sleep(3600)
    def save_checkpoint():
        mark()
        time.sleep(3600)
    if rank == 3:
        mark()
        sys.exit(0)
    threading.Thread(target=load_batches, daemon=True).start()
    (all_reduce if rank % 2 == 0 else save_checkpoint)()
    """)


@pytest.mark.local_procs
def test_a_2x2_job_shows_both_stacks_with_ranks_grouped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(tmp_path / "tiers.yaml"))
    (tmp_path / "tiers.yaml").write_text("profiles: {}\n")
    tier = api.connect("local")
    job = None
    try:
        job = tier.submit(tier.make_spec(BODY, name="stacks", nodes=2, ntasks_per_node=2))
        here = Path(job.record.jobdir)
        wait_for(lambda: all((here / f"up-{r}").exists() for r in range(4)), "every rank in place", GUARD)
        # rank 3 exits at once: wait until its rank file says so
        wait_for(lambda: any(r.rank == 3 and r.phase is RankPhase.EXITED for r in job.status().ranks),
                 "rank 3 to exit", GUARD)
        stacks = job.stacks(timeout=GUARD)
        assert [g.ranks for g in stacks.groups] == [(0, 2), (1,)], str(stacks)
        evens, odd = stacks.groups
        assert evens.nodes == ("local0", "local1") and odd.nodes == ("local0",)
        for group, func in ((evens, "all_reduce"), (odd, "save_checkpoint")):
            main, worker = group.threads
            assert main.main and [f.func for f in main.frames][:2] == ["<module>", func]
            assert main.frames[0].cell_line == 19  # the cell's last line; the magic line is line 1
            line = 11 if func == "all_reduce" else 14
            assert [(f.func, f.cell_line) for f in main.frames][1:] == [(func, line)]
            assert [(f.func, f.cell_line) for f in worker.frames][-1] == ("load_batches", 8)
        assert stacks.missing == ((3, "local1", "exited 0"),)
        text = str(stacks)
        assert "\nranks 0,2 (2) on local[0-1]\n  main thread:\n    cell line 19, in <module>:  " \
               "(all_reduce if rank % 2 == 0 else save_checkpoint)()\n" in text, text
        assert "\nrank 1 (local0)\n  main thread:\n" in text and "\nrank 3 (local1): exited 0\n" in text

        tiers_command.run(["stacks", job.id, "--timeout", "300"])
        shown = capsys.readouterr().out
        assert "ranks 0,2 (2) on local[0-1]" in shown and "rank 1 (local0)" in shown
        assert cli.main(["stacks", job.id]) == 0
        assert "in save_checkpoint" in capsys.readouterr().out

        view = QuietView(job)  # the widget's Stacks button
        try:
            view._on_front_end_msg(view, {"kind": "stacks"}, [])
            wait_for(lambda: view.stacks_text and not view.stacks_busy, "the view's stacks", GUARD)
            assert "ranks 0,2 (2) on local[0-1]" in view.stacks_text and "rank 1 (local0)" in view.stacks_text
        finally:
            view.close()
    finally:
        if job is not None:
            job.cancel()
            assert job.wait(timeout=GUARD).state is JobState.CANCELLED, job.logs()
        api.close_all()
