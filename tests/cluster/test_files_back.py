"""Issue 16 §5 on the real cluster: job.files() lists what a job left (one remote command),
job.download() streams it over the shared SSH connection with bounded memory (a 256 MiB file),
and resumes after a cut from the partial file's size."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from jupyter_tiers.core.errors import TiersError
from jupyter_tiers.core.model import JobState
from jupyter_tiers.slurm.tier import SlurmTier

# In the lane beside the slurm lane (tests/run.sh), sharing the cluster.
pytestmark = [pytest.mark.cluster, pytest.mark.slurm_beside]

BODY = """\
import os, pathlib
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out/loss.csv").write_text("step,loss\\n1,0.5\\n")
ck = pathlib.Path(os.environ["JT_CHECKPOINT_DIR"]) / "step-1"
ck.mkdir(parents=True, exist_ok=True)
(ck / "model.pt").write_bytes(b"w" * 1000)
with open("big.bin", "wb") as f:
    for _ in range(256):
        f.write(os.urandom(1 << 20))
"""


class Cut(Exception):
    pass


def test_files_download_bounded_and_resumable(box: SlurmTier, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    job = box.submit(box.make_spec(BODY, name="files-back"))
    assert job.wait(timeout=300).state is JobState.COMPLETED, job.logs()
    calls: list[object] = []
    real = box.transport.run
    monkeypatch.setattr(box.transport, "run", lambda argv, **kw: calls.append(argv) or real(argv, **kw))
    listed = {f.name: f for f in job.files()}
    assert len(calls) == 1  # one remote command for both directories
    assert {"out/loss.csv", "checkpoints/step-1/model.pt", "big.bin", "job.log"} <= set(listed)
    assert listed["big.bin"].size == 256 << 20

    dest = tmp_path / "nb"
    job.download("*.csv", dest=str(dest))
    assert (dest / "out/loss.csv").read_text() == "step,loss\n1,0.5\n"

    # A cut after 64 MiB leaves big.bin.part; the next call continues from its size.
    def cut(name: str, have: int, size: int) -> None:
        if have >= 64 << 20:
            raise Cut
    with pytest.raises(Cut):
        job.download("big.bin", dest=str(dest), progress=cut)
    partial = (dest / "big.bin.part").stat().st_size
    assert partial >= 64 << 20 and not (dest / "big.bin").exists()
    fetched: list[int] = []
    tracemalloc.start()
    try:
        job.download("big.bin", dest=str(dest), progress=lambda n, have, size: fetched.append(have))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert fetched[-1] == 256 << 20 and fetched[0] > partial  # it started at the partial size
    assert peak < 32 << 20, f"peak Python allocation {peak / 1e6:.1f} MB for a 256 MiB download"
    remote_sum = box.transport.run(["sha256sum", f"{job.record.jobdir}/big.bin"]).text().split()[0]
    import hashlib

    h = hashlib.sha256()
    with open(dest / "big.bin", "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    assert h.hexdigest() == remote_sum
    box.transport.run(["rm", "-f", "--", f"{job.record.jobdir}/big.bin"])  # 256 MiB on a shared disk


def test_files_of_a_job_whose_directory_is_gone(box: SlurmTier) -> None:
    job = box.submit(box.make_spec("print(1)\n", name="gone"))
    assert job.wait(timeout=300).state is JobState.COMPLETED
    box.transport.run(["rm", "-rf", "--", job.record.jobdir])
    assert job.files() == []
    with pytest.raises(TiersError, match=r"no file matches 'x/\.\./\.\./etc/passwd'"):
        job.download("x/../../etc/passwd")


def test_download_decides_by_content_on_the_cluster(box: SlurmTier, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29 §1 on the real cluster: the listing carries each small file's sha256 in its one
    round trip; a local metrics.csv of the same size but another run's content is kept and the
    job's saved beside it (said); the same content is not fetched again; a file larger than the
    listing hashes is hashed on the cluster only when a local file of its size is in the way."""
    import hashlib

    from jupyter_tiers.data.files import HASH_LIMIT

    body = ("import pathlib\npathlib.Path('metrics.csv').write_text('step,loss\\n1,0.25\\n')\n"
            f"pathlib.Path('large.bin').write_bytes(b'L' * {HASH_LIMIT + 1})\n")
    job = box.submit(box.make_spec(body, name="files-sha"))
    assert job.wait(timeout=300).state is JobState.COMPLETED, job.logs()
    calls: list[object] = []
    real = box.transport.run
    monkeypatch.setattr(box.transport, "run", lambda argv, **kw: calls.append(argv) or real(argv, **kw))
    listed = {f.name: f for f in job.files()}
    assert len(calls) == 1
    assert listed["metrics.csv"].sha256 == hashlib.sha256(b"step,loss\n1,0.25\n").hexdigest()
    assert listed["large.bin"].sha256 is None
    dest = tmp_path / "nb"
    dest.mkdir()
    (dest / "metrics.csv").write_text("step,loss\n1,0.50\n")
    [got] = job.download("metrics.csv", dest=str(dest))
    assert got.outcome == "renamed" and got.note.startswith("metrics.csv: saved as metrics (1).csv")
    assert (dest / "metrics.csv").read_text() == "step,loss\n1,0.50\n"
    assert (dest / "metrics (1).csv").read_text() == "step,loss\n1,0.25\n"
    [again] = job.download("metrics.csv", dest=str(dest))
    assert again.note == "metrics.csv: already up to date as metrics (1).csv (same sha256)"

    [first] = job.download("large.bin", dest=str(dest))
    assert first.outcome == "saved"
    calls.clear()
    [second] = job.download("large.bin", dest=str(dest))
    assert second.outcome == "up to date", second.note
    assert any("jt-sha" in argv for argv in calls)  # hashed on the cluster, not fetched
    box.transport.run(["rm", "-f", "--", f"{job.record.jobdir}/large.bin"])
