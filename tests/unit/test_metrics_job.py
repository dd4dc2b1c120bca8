"""Metrics where users meet them: the summary line (pure), and on the local tier (real processes)
``%%slurm_train --metrics ... --wait`` in the text view, ``job.metrics()`` (after a restart
too, from the recorded patterns) and a failed job's first error line in its summary."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_tiers import api
from jupyter_tiers.batch.status import summary_line
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.model import JobState, JobStatus, RankPhase, RankState
from jupyter_tiers.engine.tier import Job
from tests.helpers import cancel_registered_jobs, isolate_tiers, tiers_shell


def _status(state: JobState, **kw) -> JobStatus:
    return JobStatus(job_id="41", state=state, elapsed_s=12, **kw)


def test_summary_with_metric_and_error() -> None:
    ok = _status(JobState.COMPLETED, nodelist="node[1-2]", checkpoint="/ck/step-10.pt")
    assert summary_line(ok, metric=("loss", 0.012345)) == (
        "job 41 COMPLETED in 00:00:12 on node[1-2] — loss 0.01235 — checkpoint /ck/step-10.pt")
    assert summary_line(ok, error="ValueError: x") == summary_line(ok)  # no error on success
    ranks = (RankState(0, RankPhase.STOPPED, node="node1", signal=15),
             RankState(1, RankPhase.FAILED, node="node2", exit_code=1, ended_at=5.0))
    failed = _status(JobState.FAILED, ranks=ranks, world_size=2)
    assert summary_line(failed, metric=("loss", 2.31), error="RuntimeError: CUDA error: out of memory") == (
        "job 41 FAILED in 00:00:12 — first failure: rank 1 (node2) exit 1; 1 rank stopped; last loss 2.31"
        " — RuntimeError: CUDA error: out of memory")
    cancelled = _status(JobState.CANCELLED, ranks=ranks[:1], world_size=1)
    assert summary_line(cancelled, error="KeyboardInterrupt").endswith("1 rank stopped")
    running = _status(JobState.RUNNING)
    assert summary_line(running, metric=("loss", 1.0)) == summary_line(running)


# --- the local tier through the magic -------------------------------------------------------------


@pytest.fixture
def ip() -> InteractiveShell:
    return tiers_shell()


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    isolate_tiers(tmp_path, monkeypatch)
    yield
    cancel_registered_jobs()


def _values(series, key: str) -> list[float]:
    """One metric's values from job.metrics(), a DataFrame or the plain mapping."""
    if isinstance(series, dict):
        return [y for _, y in series[key]]
    return [float(v) for v in series[key].dropna()]


def _train(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], line: str, body: str) -> str:
    capsys.readouterr()
    ip.run_cell_magic("slurm_train", line, body)
    return capsys.readouterr().out


TRAIN = textwrap.dedent(
    """\
    import os
    rank = int(os.environ["RANK"])
    for step in range(1, 6):
        loss = 1.0 / step + rank  # rank 1's numbers differ: only rank 0's are read
        print(f"step={step} loss={loss:.4f} lr=3e-4", flush=True)
        print(f"eval: perplexity is {10.0 * step + rank}", flush=True)
    print({'eval_loss': 0.25 + rank, 'epoch': 1.0}, flush=True)
    """
)


@pytest.mark.local_procs
def test_metrics_in_the_text_view_and_job_metrics(ip, capsys) -> None:
    out = _train(ip, capsys, r'--nodes 2 --wait --out job --metrics "ppl=perplexity is (\S+)"', TRAIN)
    lines = out.splitlines()
    assert lines[-1].startswith("job ") and " COMPLETED in " in lines[-1], out
    assert lines[-1].endswith(" on local[0-1] — ppl 50"), out  # the custom metric is the main one
    assert lines[-2] == "metrics (rank 0): step 5, loss 0.2, lr 0.0003, ppl 50, val_loss 0.25, epoch 1", out
    job = ip.user_ns.pop("job")
    assert isinstance(job, Job)
    series = job.metrics()
    try:
        import pandas as pd
    except ImportError:
        assert isinstance(series, dict)
        assert series["loss"] == [(1.0, 1.0), (2.0, 0.5), (3.0, 0.3333), (4.0, 0.25), (5.0, 0.2)]
    else:
        assert isinstance(series, pd.DataFrame) and list(series.index) == [1, 2, 3, 4, 5]
    assert _values(series, "loss") == [1.0, 0.5, 0.3333, 0.25, 0.2]
    assert _values(series, "ppl") == [10.0, 20.0, 30.0, 40.0, 50.0]
    assert _values(job.metrics(rank=1), "ppl") == [11.0, 21.0, 31.0, 41.0, 51.0]
    # A new process reads the job's own patterns from the registry.
    api.close_all()
    again = api.connect("local").attach(job.id)
    assert again.metric_patterns() == (("ppl", r"perplexity is (\S+)"),)
    assert again.summary().endswith(" — ppl 50")  # a custom metric is the main one


@pytest.mark.local_procs
def test_failed_job_summary_names_its_first_error_line(ip, capsys) -> None:
    body = textwrap.dedent(
        """\
        import os, sys, time
        if os.environ["RANK"] == "1":
            print("step=1 loss=2.5", flush=True)
            raise ValueError("shapes (3,) and (4,) not aligned")
        time.sleep(300)
        """
    )
    out = _train(ip, capsys, "--nodes 2 --wait", body)
    last = out.splitlines()[-1]
    assert " FAILED in " in last and "first failure: rank 1" in last, out
    assert last.endswith(" — ValueError: shapes (3,) and (4,) not aligned"), out  # no known cause


CUDA_OOM = ("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total capacity; "
            "13.12 GiB already allocated; 1.01 GiB free; 13.50 GiB reserved in total by PyTorch)")


@pytest.mark.local_procs
def test_why_it_ended_in_the_text_view_the_summary_and_tiers_jobs(ip, capsys, tmp_path, monkeypatch) -> None:
    """Issue 28 §3 where users meet it: the text view's last line, job.summary() and
    ``%tiers jobs ID`` say why the job ended with the fix, in place of the first error line."""
    body = textwrap.dedent(
        f"""\
        import os, time
        if os.environ["RANK"] == "1":
            print("step=1 loss=2.5", flush=True)
            raise RuntimeError({CUDA_OOM!r})
        time.sleep(300)
        """
    )
    out = _train(ip, capsys, "--nodes 2 --wait --out job", body)
    last = out.splitlines()[-1]
    why = ("why: rank 1 (local1) ran out of GPU memory (13.12 GiB in use of 15.78 GiB; 2.00 GiB more "
           "asked) — fix: lower the batch size")
    assert " FAILED in " in last and "first failure: rank 1" in last, out
    assert " — " + why in last and "RuntimeError" not in last, out
    job = ip.user_ns.pop("job")
    assert job.summary() == last
    ip.run_line_magic("tiers", f"jobs {job.id}")
    listed = capsys.readouterr().out.splitlines()
    assert listed[-1].startswith(why) and listed[-1] == job.end_reason().line, listed
    # The sidebar's job view (REST details) shows the same reason in its summary line.
    from jupyter_tiers.app import actions

    assert actions.details(job.record.key)["view"]["summary"].endswith(" — " + listed[-1])
    # A module that sits beside the notebook, not synced: --sync is the fix.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mylib_here.py").write_text("X = 1\n")
    out = _train(ip, capsys, "--nodes 1 --wait", "import mylib_here\n")
    assert out.splitlines()[-1].endswith(
        "— why: rank 0 (local0): No module named 'mylib_here': mylib_here sits beside the notebook but "
        "is not on the cluster — fix: run with --sync . (or --sync the folder it is in)"), out


@pytest.mark.parametrize("line, words", [
    ('--metrics "loss"', "write KEY=REGEX"),
    ('--metrics "loss=(unclosed"', "not a valid regex"),
    ('--metrics "loss=no group"', "group around the number"),
])
def test_bad_metrics_option_is_a_usage_error(ip, capsys, line: str, words: str) -> None:
    with pytest.raises(UsageError) as err:
        _train(ip, capsys, f"--nodes 1 --wait {line}", "print(1)\n")
    assert words in str(err.value) and "metrics" in str(err.value)
    assert Registry().list() == []  # nothing was submitted


@pytest.mark.local_procs
def test_wait_with_the_live_widget_prints_the_widgets_summary(ip, capsys, monkeypatch) -> None:
    """``--wait`` with the widget shows the same line as its ``summary`` trait (the main metric's
    last value and, for a failed job, its first error line) as plain text for a text-only front
    end only: a widget front end shows it once, in the widget (issue 21)."""
    from jupyter_tiers.faces import display as display_module

    shown: list = []
    monkeypatch.setattr(display_module, "widgets_available", lambda: True)
    class Handle:
        def update(self, obj: object, **_: object) -> None:
            shown.append(obj)

    def display(obj: object, **_: object) -> Handle:
        shown.append(obj)
        return Handle()

    monkeypatch.setattr("IPython.display.display", display)
    ok = _train(ip, capsys, '--nodes 1 --wait --metrics "ppl=perplexity is (\\S+)"', TRAIN)
    widget, *lines = shown
    line = lines[-1]
    assert widget.summary and line == display_module.plain_only(
        display_module.live_line(widget.summary, "", widget.job_id)), ok
    assert widget.summary.endswith(" — ppl 50"), ok
    assert widget.summary not in ok  # not printed a second time under the widget
    widget.close()
    body = 'print("step=1 loss=2.5", flush=True)\nraise RuntimeError("CUDA error: out of memory")\n'
    del shown[:]
    failed = _train(ip, capsys, "--nodes 1 --wait", body)
    widget, *lines = shown
    assert lines[-1] == display_module.plain_only(display_module.live_line(widget.summary, "", widget.job_id))
    assert " FAILED in " in widget.summary, failed
    # Why it ended, with the fix, in place of the first error line (issue 28 §3).
    assert widget.summary.endswith(" — why: rank 0 (local0) ran out of GPU memory — fix: lower the batch "
                                   "size (or accumulate gradients), use bf16/fp16 or activation "
                                   "checkpointing, or shard the model (FSDP)"), failed
    assert widget.summary not in failed
    widget.close()
