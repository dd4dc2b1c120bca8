"""A finished log is streamed, not loaded whole: Job.iter_logs() over the real sshd gives the log's
text in several pieces (multi-byte characters and invalid bytes split anywhere decode as one
read would), and Job.logs() is their concatenation."""

from __future__ import annotations

import random
from pathlib import Path

from jupyter_tiers.config.registry import JobRecord
from jupyter_tiers.engine.handles import Job
from jupyter_tiers.slurm.tier import SlurmTier


def _record(jobdir: Path) -> JobRecord:
    return JobRecord(profile="box", tier="slurm", job_id="1", name="paging", jobdir=str(jobdir),
                     world_size=2)


def test_iter_logs_streams_a_big_log_in_pieces(box: SlurmTier, tmp_path: Path) -> None:
    rng = random.Random(11)
    words = ["loss", "ü", "✓", "日本", "\xff", "🙂", " "]
    lines = []
    for i in range(60_000):
        text = "".join(rng.choice(words) for _ in range(rng.randint(0, 8)))
        lines.append(f"{i % 2}: step {i} {text}")
    data = "\n".join(lines).encode("utf-8", errors="surrogateescape").replace(b"\xc3\xbf", b"\xff")
    tmp_path.chmod(0o755)
    (tmp_path / "job.log").write_bytes(data)
    job = Job(box, _record(tmp_path))

    pieces = list(job.iter_logs())
    assert len(pieces) > 1, "a multi-megabyte log came back in one piece"
    assert "".join(pieces) == data.decode("utf-8", errors="replace")
    assert job.logs() == "".join(pieces)
    assert "".join(job.iter_logs(offset=len(data) - 5)) == data[-5:].decode("utf-8", errors="replace")


def test_iter_logs_of_a_log_not_written_yet_is_empty(box: SlurmTier, tmp_path: Path) -> None:
    job = Job(box, _record(tmp_path / "nothing-here"))
    assert list(job.iter_logs()) == []
    assert job.logs() == ""
