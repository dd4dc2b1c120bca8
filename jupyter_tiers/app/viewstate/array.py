"""Pure: an array's task table rows, as the ArrayView table and the REST details show them."""

from __future__ import annotations

from typing import Any

from ...batch.metrics import format_value
from ...core.model import JobState, JobStatus
from ...core.timefmt import format_elapsed

SHOWS_EXIT = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.TIMEOUT, JobState.NODE_FAIL,
                        JobState.OUT_OF_MEMORY, JobState.BOOT_FAIL, JobState.DEADLINE})


def task_row(index: int, label: str, status: JobStatus | None,
             metric: tuple[str, float] | None, failure: str | None) -> list[Any]:
    """One table row (pure): [index, params, state, elapsed, metric, exit]."""
    exit_text = ""
    if status is not None and status.state in SHOWS_EXIT:  # a cancelled task's 0 would mislead
        first = status.first_failure
        if first is not None:
            exit_text = f"rank {first.rank} exit {first.exit_code}" if first.exit_code is not None \
                else f"rank {first.rank} signal {first.signal}"
        elif status.exit_code is not None:
            exit_text = str(status.exit_code)
    return [index, label, status.state.value if status else "PENDING",
            format_elapsed(status.elapsed_s) if status and status.elapsed_s is not None else "",
            f"{metric[0]} {format_value(metric[1])}" if metric else "", failure or exit_text]
