"""A job that looks hung, on the local tier (real supervisor, rank shims sampling each second,
the watcher following the log): with a short ``hang_after`` the status says "no progress on any
rank" while every rank sleeps without a line, and a new log line clears it. No timed assertions:
the quiet time is the rule's, the waits are for what the watcher delivers."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from jupyter_tiers.batch.hang import HangRule
from jupyter_tiers.core.model import JobState, JobStatus
from jupyter_tiers.local.tier import LocalTier
from tests.helpers import wait_for

GUARD = 300.0
BODY = textwrap.dedent("""\
    import os, time
    here = os.environ["JT_JOB_DIR"]
    print("ready", flush=True)
    while not os.path.exists(os.path.join(here, "talk")):
        time.sleep(0.2)
    print("progress", flush=True)
    while not os.path.exists(os.path.join(here, "stop")):
        time.sleep(0.2)
    """)


@pytest.fixture(autouse=True)
def _heartbeat_each_second(monkeypatch: pytest.MonkeyPatch) -> None:
    """Samples each second for conftest's ``tier`` (its ranks keep JT_HEARTBEAT from here)."""
    monkeypatch.setenv("JT_HEARTBEAT", "1")


def test_a_quiet_idle_job_is_said_to_look_hung_until_a_line_comes(tier: LocalTier) -> None:
    tier.watcher.hang_rule = HangRule(after=3, warmup=0)
    job = tier.submit(tier.make_spec(BODY, name="quiet", ntasks_per_node=2))
    seen: list[JobStatus] = []
    lines: list[str] = []
    here = Path(job.record.jobdir)
    try:
        with job.watch(on_status=seen.append, on_lines=lambda batch: lines.extend(ln.text for ln in batch)):
            wait_for(lambda: any(s.stalled for s in seen), "the job to be said to look hung", GUARD)
            said = next(s.stalled for s in seen if s.stalled)
            assert said is not None and said.startswith("no progress on any rank for ")
            assert said.endswith(": Stacks?") and lines.count("ready") == 2
            (here / "talk").write_text("")
            wait_for(lambda: lines.count("progress") == 2, "both ranks' line", GUARD)
            n = len(seen)
            # the watcher's next statuses, once it has read those lines: cleared
            wait_for(lambda: any(s.stalled is None for s in seen[n:]), "the line to clear it", GUARD)
    finally:
        (here / "stop").write_text("")
    assert job.wait(timeout=GUARD).state is JobState.COMPLETED
