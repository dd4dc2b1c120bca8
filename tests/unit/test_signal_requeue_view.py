"""What the notebook shows of a requeued job: the widget's restart count, the marker line the
front end styles (the same pattern as requeue.py's), the text view's state line."""

from __future__ import annotations

import re
from pathlib import Path

from jupyter_tiers.app.viewstate.job import status_traits
from jupyter_tiers.batch.requeue import marker_restart, restart_marker
from jupyter_tiers.core.model import JobState, JobStatus

WIDGETS = Path(__file__).resolve().parents[2] / "jupyter_tiers" / "faces" / "widgets"


def test_traits_carry_the_restart_count() -> None:
    assert status_traits(JobStatus("1", JobState.RUNNING, restarts=2))["restarts"] == 2
    assert status_traits(JobStatus("1", JobState.RUNNING))["restarts"] == 0


def test_front_end_marks_the_same_lines_as_the_kernel() -> None:
    js = (WIDGETS / "job_view.js").read_text(encoding="utf-8")
    found = re.search(r"const RESTART_RE = /(.+)/;", js)
    assert found, "job_view.js has no RESTART_RE"
    pattern = re.compile(found.group(1))
    for n in (1, 2, 37, 999999):
        assert pattern.search(restart_marker(n)) and marker_restart(restart_marker(n)) == n
    for text in ("— restart —", "restart 1", "— restart 1 — x", "x — restart 1 —"):
        assert not pattern.search(text) and marker_restart(text) is None
    assert 'rank === null && RESTART_RE.test(text)' in js  # a rank's own line is never a marker


def test_css_styles_the_marker_and_the_requeue_states_with_theme_variables() -> None:
    css = (WIDGETS / "job_view.css").read_text(encoding="utf-8")
    for selector in ('.jt-line.jt-restart', '.jt-state[data-state="PREEMPTED"]',
                     '.jt-state[data-state="REQUEUED"]', ".jt-restarts"):
        rule = css[css.index(selector):]
        rule = rule[: rule.index("}")]
        assert "var(--jp-" in rule, selector



def test_a_failed_run_after_a_restart_names_its_own_error() -> None:
    from jupyter_tiers.batch.metrics import MetricsTracker
    from jupyter_tiers.core.model import LogLine

    tracker = MetricsTracker()
    tracker.feed([LogLine("RuntimeError: [c10d] Connection reset by peer", 1)])
    assert tracker.error == "RuntimeError: [c10d] Connection reset by peer"
    tracker.feed([
        LogLine("slurmstepd-node1: error: *** JOB 7 ON node1 CANCELLED AT 2026-12-03T03:28:36 "
                "DUE TO JOB REQUEUE ***"),
        LogLine("srun: error: node2: task 1: Exited with exit code 143"),
        # a rank dying with its run: an exception of run 0, not the cause of what comes next
        LogLine("RuntimeError: [c10d] Connection reset by peer", 1),
        LogLine(restart_marker(1)),
        LogLine("loss=0.5", 0),
    ])
    assert tracker.error is None
    tracker.feed([LogLine("RuntimeError: CUDA error: out of memory", 1)])
    assert tracker.error == "RuntimeError: CUDA error: out of memory"
    tracker.feed([LogLine("— restart 1 — is only text here", 0)])
    assert tracker.error == "RuntimeError: CUDA error: out of memory"
