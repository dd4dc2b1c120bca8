"""JobView's Python side on real local jobs: traits follow the job, lines arrive batched, and a
reattached view shows only the log's end, starting at a whole line."""

from __future__ import annotations

from typing import Any

from jupyter_tiers.app.viewstate.job import message_rows
from jupyter_tiers.faces.widgets.job_view import JobView
from jupyter_tiers.local.tier import LocalTier
from tests.helpers import SentRecorder


class RecordingView(SentRecorder, JobView):
    """A JobView that keeps the custom messages it would send to the browser."""

    def rows(self) -> list[list[Any]]:
        with self.sent_lock:
            return [row for msg in self.sent if msg.get("kind") == "lines" for row in message_rows(msg)]


# Each rank writes its 400 lines at once; rank 1 fails only once rank 0 has written all of its
# own, so fail-stop never cuts rank 0 short however slowly a busy machine starts it.
BODY = """\
import os, sys, time
rank = int(os.environ["RANK"])
sys.stdout.write("".join(f"line {i:04d} from rank {rank} " + "x" * 40 + "\\n" for i in range(400)))
sys.stdout.flush()
jobdir = os.environ["JT_JOB_DIR"]
open(os.path.join(jobdir, f"rank{rank}-printed"), "w").close()
if rank == 1:
    while not os.path.exists(os.path.join(jobdir, "rank0-printed")):
        time.sleep(0.05)
    print("Traceback (most recent call last):", file=sys.stderr)
    sys.exit(3)
"""


def test_traits_follow_the_job_and_lines_arrive_in_few_messages(tier: LocalTier) -> None:
    job = tier.submit(tier.make_spec(BODY, name="view", nodes=2))
    view = RecordingView(job)
    status = view.wait(timeout=120)
    assert status is not None
    assert view.state == "FAILED" and view.terminal
    assert view.first_failure == 1
    assert view.ranks[1][0] == "f"
    assert view.ranks[0][0] in ("x", "s")  # finished first, or stopped by fail-stop
    assert view.ranks[1][2] == 3  # exit code of the failing rank
    assert view.summary.startswith(f"job {job.id} FAILED") and "rank 1" in view.summary
    rows = view.rows()
    rank0 = [text for rank, text, _ in rows if rank == 0]
    assert rank0[:2] == [f"line 0000 from rank 0 {'x' * 40}", f"line 0001 from rank 0 {'x' * 40}"]
    errors = [text for _, text, is_error in rows if is_error]
    assert "Traceback (most recent call last):" in errors
    # Batching: hundreds of lines, a handful of messages.
    assert len(view.sent) < len(rows) / 20


def test_reattached_view_shows_only_the_end_from_a_whole_line(tier: LocalTier) -> None:
    job = tier.submit(tier.make_spec(BODY.replace("if rank == 1", "if False"), name="tail"))
    job.wait(timeout=120)
    size = tier.log_size(job.record)
    RecordingView.backlog_bytes = 2000
    try:
        view = RecordingView(job, log_offset=None)
        view.wait(timeout=60)
    finally:
        RecordingView.backlog_bytes = JobView.backlog_bytes
    assert view.log_skipped_bytes == size - 2000
    rows = view.rows()
    assert rows, "no lines after reattaching"
    assert all(text.startswith("line ") for _, text, _ in rows)  # no half line at the start
    assert rows[-1][1].startswith("line 0399 from rank 0")
    assert sum(len(f"{r}: {t}\n") for r, t, _ in rows) <= 2000
