"""JobView's metrics on real local jobs: the ``metrics`` trait carries rank 0's series for the SVG
charts (downsampled, JSON-safe), and the widget's summary names the main metric and, for a
failed job, its first error line."""

from __future__ import annotations

import json

from jupyter_tiers.core.model import JobState
from jupyter_tiers.engine.handles import Job
from jupyter_tiers.local.tier import LocalTier
from tests.local.conftest import QuietView


def watch_to_the_end(tier: LocalTier, body: str, name: str, state: JobState) -> tuple[Job, QuietView]:
    """Submit ``body`` on two nodes, watch it with a QuietView until it ends (bounded) and check
    that it ended in ``state``."""
    job = tier.submit(tier.make_spec(body, name=name, nodes=2))
    view = QuietView(job)
    status = view.wait(120)
    assert status is not None and status.state is state
    return job, view


def test_metrics_trait_and_summary(tier: LocalTier) -> None:
    body = (
        "import os\n"
        "rank = int(os.environ['RANK'])\n"
        "for step in range(1, 3001):\n"
        "    print(f'step={step} loss={1.0 / step + 100 * rank:.6f} lr=3e-4', flush=step % 500 == 0)\n"
        "print('loss=nan')\n"
    )
    job, view = watch_to_the_end(tier, body, "view-metrics", JobState.COMPLETED)
    data = view.metrics
    assert set(data) == {"step", "loss", "lr"}
    loss = data["loss"]
    assert len(loss) <= 200  # bounded for the browser, whatever the log's length
    finite = [y for _, y in loss if y is not None]
    assert max(finite) <= 1.0  # rank 1's values (100+) never reach rank 0's chart
    assert loss[-1][1] is None  # the final NaN travels as null: JSON has no NaN
    json.dumps(data, allow_nan=False)
    assert view.summary.startswith(f"job {job.id} COMPLETED in ") and view.summary.endswith(" — loss nan")
    view.close()


def test_failed_job_summary_in_the_widget(tier: LocalTier) -> None:
    body = (
        "import os, time\n"
        "if os.environ['RANK'] == '1':\n"
        "    print('step=1 loss=2.5', flush=True)\n"
        "    raise ValueError('bad batch shape (3, 4)')\n"
        "time.sleep(60)\n"
    )
    _, view = watch_to_the_end(tier, body, "view-fail", JobState.FAILED)
    assert "first failure: rank 1" in view.summary
    assert view.summary.endswith(" — ValueError: bad batch shape (3, 4)")
    assert view.metrics == {}  # rank 0 printed no metric
    view.close()
