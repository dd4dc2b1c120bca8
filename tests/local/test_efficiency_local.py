"""What a job used, on the local tier (real supervisor, rank shims sampling each second): once
the job ended, ``job.efficiency()`` gives the CPU of its two cores and its memory peak, and the
summary line ends with it. No timed assertions: the waits are for samples and states."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from jupyter_tiers.core.model import JobState
from jupyter_tiers.local.tier import LocalTier
from tests.helpers import wait_for

GUARD = 300.0
BODY = textwrap.dedent("""\
    import os
    block = bytearray(64 * 1024 * 1024)
    for i in range(0, len(block), 4096):
        block[i] = 1
    while not os.path.exists(os.path.join(os.environ["JT_JOB_DIR"], "stop")):
        sum(range(20000))
    """)


@pytest.fixture(autouse=True)
def _heartbeat_each_second(monkeypatch: pytest.MonkeyPatch) -> None:
    """Samples each second for conftest's ``tier`` (its ranks keep JT_HEARTBEAT from here)."""
    monkeypatch.setenv("JT_HEARTBEAT", "1")


def test_an_ended_job_says_what_it_used(tier: LocalTier) -> None:
    job = tier.submit(tier.make_spec(BODY, name="used", ntasks_per_node=2, mem="8G"))
    try:
        def sampled() -> bool:
            rows = job.usage()
            rows = rows.to_dict("records") if hasattr(rows, "to_dict") else rows
            held = [r["rank"] for r in rows if r["rss_mib"] > 50]
            return all(held.count(rank) >= 2 for rank in (0, 1))

        wait_for(sampled, "two samples of each rank holding its memory", GUARD)
    finally:
        Path(job.record.jobdir, "stop").write_text("")
    status = job.wait(timeout=GUARD)
    assert status.state is JobState.COMPLETED, job.logs()
    used = job.efficiency(status)
    assert used is not None and used.cores == 2 and used.cpu_s and used.cpu_s > 0
    assert used.mem_peak_bytes is not None and used.mem_peak_bytes > 2 * 50 * 1024 * 1024
    assert used.mem_asked_bytes == 8 << 30 and used.source == "samples"
    assert used.line.startswith("CPU ") and " % of 2 cores over " in used.line
    assert " of 8 GB per node" in used.line
    # The summary line says it only for a run of a minute or more (a few seconds say nothing of
    # how a job fits what it asked): the same numbers, as the summary would end.
    from dataclasses import replace

    longer = replace(used, elapsed_s=90.0)
    assert longer.for_summary == str(longer) and used.for_summary is None
    assert not job.summary(status).endswith(str(used))
