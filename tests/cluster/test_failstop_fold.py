"""Issue 20 item 17 on the real cluster: after a rank fails, Slurm's reports of the fail-stop's
kills are what failstop.py folds, the failure's own report and traceback are not, and the text
view ends with the failing rank's traceback and one fold line instead of the kill reports."""

from __future__ import annotations

import io
import re
import textwrap
from typing import Any

import pytest

from jupyter_tiers.app.viewstate.job import message_rows, text_message
from jupyter_tiers.batch.failstop import Failure, fold_text, is_stop_report, parse_task_list
from jupyter_tiers.batch.logs import split_log_line
from jupyter_tiers.core.model import JobState
from jupyter_tiers.faces.widgets.job_view import JobView
from jupyter_tiers.faces.widgets.text import TextView
from jupyter_tiers.slurm.tier import SlurmTier
from tests.cluster.conftest import RANKS_UP
from tests.helpers import SentRecorder

# In the lane beside the slurm lane (tests/run.sh), sharing the cluster.
pytestmark = [pytest.mark.cluster, pytest.mark.slurm_beside]

BODY = RANKS_UP + textwrap.dedent(
    """\
    import os, time
    rank = int(os.environ["RANK"])
    print("rank", rank, "up", flush=True)
    if rank == 5:
        all_up()
        raise RuntimeError("rank 5 gives up")
    time.sleep(120)
    """
)


class RecordingView(SentRecorder, JobView):
    """A JobView that keeps the messages it would send to the browser."""

    def pane(self) -> list[tuple[str, bool]]:
        """The (raw line, folded) rows the browser's pane holds after every message, as
        job_view.js builds them: a reset replaces the rows, the others add to them."""
        rows: list[tuple[str, bool]] = []
        with self.sent_lock:
            for msg in self.sent:
                if msg.get("kind") != "lines":
                    continue
                fold = set(msg.get("fold", []))
                new = [(text if rank is None else f"{rank}: {text}", i in fold)
                       for i, (rank, text, _err) in enumerate(message_rows(msg))]
                rows = new if msg.get("reset") else rows + new
        return rows


def test_the_fail_stops_kill_reports_fold_and_the_traceback_stays(box: SlurmTier) -> None:
    job = box.submit(box.make_spec(BODY, name="fold", nodes=2, ntasks_per_node=4))
    view = RecordingView(job)
    out = io.StringIO()
    status = TextView(job, out, attach=True).run(timeout=300)
    assert view.wait(timeout=120) is not None
    assert status is not None and status.state is JobState.FAILED
    first = status.first_failure
    assert first is not None and first.rank == 5 and first.node

    log = job.logs()
    lines = log.splitlines()
    failure = Failure(5, first.node)
    fold = fold_text(log + "\n", failure)
    folded = [lines[i] for i in fold.lines]
    reports = [ln for ln in lines if split_log_line(ln)[0] is None and is_stop_report(ln)]
    # Every stop report but the failure's own is folded; at least the other node's ranks' one.
    own = [ln for ln in reports if ln not in folded]
    assert len(own) == 1 and own[0].startswith(f"srun: error: {first.node}: task 5: ") and folded, reports
    named: set[int] = set()
    for ln in folded:
        m = re.match(r"srun: error: [\w.-]+: tasks? ([\d,-]+): ", ln)
        named |= (parse_task_list(m.group(1)) or set()) if m else set()
    assert named and named <= set(range(8)) - {5}, folded  # kill reports of the other ranks only
    assert [split_log_line(lines[i]) for i in fold.marks] == [(5, "Traceback (most recent call last):")]
    assert text_message(log + "\n", failure=failure)["fold"] == fold.lines

    # The widget: every kill report the pane holds is folded, and nothing else.
    pane: list[tuple[str, Any]] = view.pane()
    assert sorted(ln for ln, is_folded in pane if is_folded) == sorted(folded)
    assert view.fold_label == f"7 ranks stopped by fail-stop after rank 5 ({first.node}) failed"

    text = out.getvalue()
    assert not any(ln in text.splitlines() for ln in folded), text
    assert own[0] in text
    tail = text.splitlines()
    fold_line = next(ln for ln in tail if "ranks stopped by fail-stop after rank 5" in ln)
    assert fold_line.startswith(f"7 ranks stopped by fail-stop after rank 5 ({first.node}) failed ("), \
        fold_line
    # What precedes the closing lines (fold, metrics, summary) is rank 5's traceback and report.
    body = tail[: tail.index(fold_line)]
    last_rank5 = max(i for i, ln in enumerate(body) if ln.startswith("5: "))
    assert body[last_rank5] == "5: RuntimeError: rank 5 gives up"
    assert all(not ln.startswith(("srun: error: node", "slurmstepd")) or ln == own[0]
               for ln in body[last_rank5:]), body[last_rank5:]
