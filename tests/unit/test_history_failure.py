"""Issue 29 item 6: History's EXIT says who failed as the job widget does (``rank 3 exit 1``),
not the batch script's exit (15 after fail-stop's SIGTERM): the registry keeps an ended job's
first failed rank, the Slurm history marks our rows with it, and a job not ours gets its failed
step's own exit (``step 0 exit 1``) when it differs from the job's."""

from __future__ import annotations

import random
from pathlib import Path

from jupyter_tiers.batch.history import make_query
from jupyter_tiers.batch.status import ended_entry, ended_failure, failure_words
from jupyter_tiers.config.registry import JobRecord, Registry
from jupyter_tiers.core.detail import entries
from jupyter_tiers.core.model import JobState, JobStatus, RankPhase, RankState
from jupyter_tiers.slurm.history import DELIMITER, parse_history
from tests.unit.test_history import _FakeTransport, _tier


def sacct(*rows: tuple[str, ...]) -> str:
    """sacct -P lines (HISTORY_FIELDS) for (raw id, state, exit code) rows."""
    out = []
    for raw, state, code in rows:
        fields = [raw, raw, state, code, "00:01:01", "2", "node[1-2]", "", "u" if "." not in raw else "",
                  "2026-12-06T04:00:00", "2026-12-06T04:00:01", "2026-12-06T04:01:02", "debug", "/w", "sv"]
        out.append(DELIMITER.join(fields))
    return "\n".join(out) + "\n"


FAILSTOP = sacct(("41", "FAILED", "15:0"), ("41.batch", "FAILED", "15:0"), ("41.0", "FAILED", "1:0"))


def failed_status() -> JobStatus:
    ranks = (*(RankState(r, RankPhase.STOPPED, node="node2", signal=15) for r in range(3)),
             RankState(3, RankPhase.FAILED, node="node1", exit_code=1))
    return JobStatus("41", JobState.FAILED, ranks=ranks, world_size=4, exit_code=15)


def test_failure_words_say_it_as_the_widget_does() -> None:
    entry = ended_entry(failed_status())["failure"]  # type: ignore[index]
    assert entry == {"rank": 3, "node": "node1", "exit": 1, "signal": None}
    assert failure_words(entry) == "rank 3 exit 1"
    assert failure_words({"rank": 2, "exit": None, "signal": 9}) == "rank 2 killed by SIGKILL (9)"
    assert failure_words({"rank": 2}) == "rank 2 failed"
    running = JobStatus("41", JobState.RUNNING, ranks=failed_status().ranks, world_size=4)
    assert ended_entry(running) is None  # recorded once the job ended


def test_failure_words_of_foreign_entries_are_empty_seeded() -> None:
    rng = random.Random(296)
    values = [None, True, -1, 0, 3, "3", 1.5, [], {}, "x" * 50]
    for _ in range(500):
        names = rng.sample(["rank", "exit", "signal", "node"], rng.randint(0, 4))
        entry = {k: rng.choice(values) for k in names}
        words = failure_words(rng.choice([entry, None, "rank 3", 7, []]))
        assert words == "" or words.startswith("rank ")


def test_a_failed_step_names_its_own_exit_when_not_ours() -> None:
    [row] = parse_history(FAILSTOP)
    assert row.exit_code == 15 and row.exit == "step 0 exit 1"
    [same] = parse_history(sacct(("42", "FAILED", "1:0"), ("42.0", "FAILED", "1:0")))
    assert same.exit == "1"  # the step said nothing the job did not


def test_history_of_our_job_shows_the_first_failed_rank(tmp_path: Path) -> None:
    tier = _tier(tmp_path, _FakeTransport(0, FAILSTOP, ""))
    rec = JobRecord(profile="box", tier="slurm", job_id="41", name="sv", world_size=4)
    tier.registry.add(rec)
    [before] = tier.history(make_query(days=1))
    assert before.ours and before.exit == "step 0 exit 1"
    rec = tier.registry.get(rec.key)
    tier.registry.record_end(rec, failed_status())
    assert entries(tier.registry.get(rec.key).detail)["ended"]["failure"]["rank"] == 3
    [row] = tier.history(make_query(days=1))
    assert row.exit == "rank 3 exit 1" and row.to_json()["exit"] == "rank 3 exit 1"


def test_record_end_keeps_other_entries_and_writes_once(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "r.sqlite")
    rec = JobRecord(profile="box", tier="slurm", job_id="41", name="sv", world_size=4, detail='{"upload": 1}')
    reg.add(rec)
    reg.record_end(reg.get(rec.key), failed_status())
    stored = reg.get(rec.key)
    assert entries(stored.detail)["upload"] == 1
    assert ended_failure(entries(stored.detail)) == "rank 3 exit 1"  # what History's EXIT says
    calls = []
    reg.change_detail = lambda *a: calls.append(a)  # type: ignore[method-assign]
    reg.record_end(stored, failed_status())
    assert calls == []
