"""The job directory's disk full on the cluster side (issue 18 item 6), the pure parts and the
submit's answer: the free space the rank query reports, the one line a view shows, a submit
refused with the workdir named."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from jupyter_tiers.batch.jobdir import DISK_FULL_BYTES, disk_full_note, parse_free_space, parse_rank_files
from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.errors import SubmitError
from jupyter_tiers.slurm.commands import RANKS_SH
from jupyter_tiers.slurm.tier import SlurmTier
from jupyter_tiers.transport.exchange import CommandResult

# The rank query's answer for two job directories, the first on a full tmpfs.
ANSWER = """\
@@ /scratch/full/jobs/a
/scratch/full/jobs/a/ranks/0:start 1764789786.1 node1 0
% 0 1764789790.5
%free 0 4096
@@ /home/u/jt/b
%free 250000 4096
"""


def test_parse_free_space_per_job_directory() -> None:
    assert parse_free_space(ANSWER) == {"/scratch/full/jobs/a": 0, "/home/u/jt/b": 250000 * 4096}
    # The rank states read as before: the new line is no rank line.
    assert list(parse_rank_files(ANSWER)["/scratch/full/jobs/a"]) == [0]
    assert parse_free_space("%free 1 2\n@@ /x\n%free x 2\n%free 3\n") == {}


def test_the_rank_query_asks_for_the_free_space() -> None:
    assert "stat -f -c '%%free %a %S' -- \"$d\"" in RANKS_SH


def test_disk_full_note_names_the_directory_in_one_line() -> None:
    note = disk_full_note("/scratch/full/jobs/a", 0)
    assert note is not None and "/scratch/full/jobs/a" in note and "\n" not in note
    assert "No space left on device" in note and "0 KiB free" in note
    assert disk_full_note("/x", DISK_FULL_BYTES) is None
    assert disk_full_note("/x", None) is None


def test_parse_free_space_fuzz_never_raises() -> None:
    rng = random.Random(20261206)
    alphabet = "@@ %free0123456789/ab\n\t-x"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 80)))
        for path, free in parse_free_space(text).items():
            assert isinstance(path, str) and free >= 0


class _Transport:
    """Answers the submit round trip as the cluster did on a full tmpfs."""

    def run(self, argv, stdin=b"", check=True, timeout=None):  # type: ignore[no-untyped-def]  # a fake
        return CommandResult(tuple(argv), 1, b"", b"cat: write error: No space left on device\n")

    def close(self) -> None:
        pass


def test_a_submit_on_a_full_cluster_disk_names_the_workdir(tmp_path: Path) -> None:
    profile = Profile(name="box", tier="slurm", settings={"host": "h", "workdir": "/scratch/full/jobs"})
    tier = SlurmTier(profile, Registry(tmp_path / "r.sqlite"), transport=_Transport())  # type: ignore[arg-type]  # a fake
    with pytest.raises(SubmitError) as got:
        tier.submit(tier.make_spec("print(1)", name="x"))
    text = str(got.value)
    assert "/scratch/full/jobs" in text and "No space left on device" in text and "\n" not in text
    assert "sbatch refused" not in text  # before: "sbatch refused the job: cat: write error: ..."
    assert tier.registry.list() == []
