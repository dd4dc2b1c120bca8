"""`%tiers jobs`' table (tiers_command.format_jobs, pure): a requeued job says its restarts."""

from __future__ import annotations

from jupyter_tiers.config.registry import JobRecord
from jupyter_tiers.faces.tiers_command import format_jobs


def _row(table: str, job_id: str) -> str:
    return next(line for line in table.splitlines() if line.split()[0] == job_id)


def test_restarts_in_the_state_column() -> None:
    now = 1_000_000.0
    records = [
        JobRecord("box", "slurm", "7", "plain", world_size=2, submitted_at=now - 90, state="RUNNING"),
        JobRecord("box", "slurm", "8", "once", world_size=2, submitted_at=now - 30, state="RUNNING",
                  restarts=1),
        JobRecord("box", "slurm", "9", "twice", world_size=4, submitted_at=now - 4000,
                  state="COMPLETED", restarts=2),
    ]
    table = format_jobs(records, now=now)
    assert table.splitlines()[0].split() == ["ID", "KIND", "NAME", "PROFILE", "TIER", "STATE", "SIZE",
                                             "WHERE", "STARTED"]
    assert " RUNNING " in _row(table, "7") and "restart" not in _row(table, "7")
    assert " RUNNING (1 restart) " in _row(table, "8")
    assert " COMPLETED (2 restarts) " in _row(table, "9") and _row(table, "9").endswith("1h ago")
    # the columns stay aligned: every row's STARTED begins where the header's does
    start = table.splitlines()[0].index("STARTED")
    assert all(line[start:start + 1].strip() for line in table.splitlines()[1:])
