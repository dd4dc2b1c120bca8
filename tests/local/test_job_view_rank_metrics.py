"""JobView on a real local job: the charts' rank follows the front end's metrics_rank request
(the picked rank's series read from the log, rank 0's summary unchanged), bad requests are
ignored, and the grid's ranks per node comes from the submitted shape."""

from __future__ import annotations

import threading

import pytest

from jupyter_tiers.core.model import JobState
from jupyter_tiers.local.tier import LocalTier
from tests.local.conftest import QuietView


def test_the_charts_switch_to_the_rank_the_front_end_asks_for(tier: LocalTier) -> None:
    body = (
        "import os\n"
        "rank = int(os.environ['RANK'])\n"
        "for step in range(1, 301):\n"
        "    print(f'step={step} loss={1.0 / step + 100 * rank:.6f}', flush=True)\n"
    )
    job = tier.submit(tier.make_spec(body, name="view-rank", nodes=2, ntasks_per_node=2))
    view = QuietView(job)
    assert view.ranks_per_node == 2 and view.world_size == 4
    status = view.wait(120)
    assert status is not None and status.state is JobState.COMPLETED
    assert view.metrics_rank == 0 and max(y for _, y in view.metrics["loss"]) <= 1.0
    summary = view.summary
    assert summary.endswith(" — loss 0.003333")

    for bad in (4, -1, "1", True, None, 1.0):  # out of range or not an int: ignored
        view._on_front_end_msg(view, {"kind": "metrics_rank", "rank": bad}, [])
    assert view.metrics_rank == 0 and view._metrics.wanted == 0

    switched = threading.Event()
    view.observe(lambda change: switched.set() if change["new"] == 3 else None, names="metrics_rank")
    view._on_front_end_msg(view, {"kind": "metrics_rank", "rank": 3}, [])
    assert switched.wait(60)
    loss = view.metrics["loss"]
    assert all(300 <= y <= 301 for _, y in loss)  # rank 3's values only
    assert loss[0][0] <= 2 and loss[-1][0] >= 299 and len(loss) < 200  # all its steps, bounded
    assert view._metrics.chart.series["loss"].last == pytest.approx(300.003333)
    assert view.summary == summary  # the summary stays rank 0's
    view._on_front_end_msg(view, {"kind": "metrics_rank", "rank": 0}, [])
    assert view.metrics_rank == 0 and max(y for _, y in view.metrics["loss"]) <= 1.0
    view.close()
