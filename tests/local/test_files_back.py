"""Issue 16 §5 on the local tier: job.files() lists what a job left (job and checkpoint
directories), job.download() fetches it; a 200 MB file downloads with bounded memory."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from jupyter_tiers.core.model import JobState
from jupyter_tiers.local.tier import LocalTier

BODY = """\
import os, pathlib
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out/loss.csv").write_text("step,loss\\n1,0.5\\n")
pathlib.Path("plot.png").write_bytes(b"PNG" * 100)
ck = pathlib.Path(os.environ["JT_CHECKPOINT_DIR"]) / "step-1"
ck.mkdir(parents=True, exist_ok=True)
(ck / "model.pt").write_bytes(b"w" * 1000)
"""


def test_files_and_download(tier: LocalTier, tmp_path: Path) -> None:
    job = tier.submit(tier.make_spec(BODY, name="leaves-files"))
    assert job.wait(timeout=120).state is JobState.COMPLETED, job.logs()
    names = {f.name: f for f in job.files()}
    assert {"out/loss.csv", "plot.png", "checkpoints/step-1/model.pt", "job.log", "main.py"} <= set(names)
    assert not any(n.startswith("ranks/") for n in names)
    assert names["plot.png"].size == 300 and names["plot.png"].mtime > 0
    assert [f.name for f in job.files("*.csv")] == ["out/loss.csv"]

    dest = tmp_path / "nb"
    got = job.download("*.csv", dest=str(dest))
    assert [d.path for d in got] == [dest.resolve() / "out/loss.csv"]
    assert (dest / "out/loss.csv").read_text() == "step,loss\n1,0.5\n"
    job.download("checkpoints/*", dest=str(dest))
    assert (dest / "checkpoints/step-1/model.pt").read_bytes() == b"w" * 1000


def test_large_download_has_bounded_memory(tier: LocalTier, tmp_path: Path) -> None:
    body = ("with open('big.bin', 'wb') as f:\n"
            "    for _ in range(200):\n"
            "        f.write(b'x' * (1 << 20))\n")
    job = tier.submit(tier.make_spec(body, name="big-file"))
    assert job.wait(timeout=300).state is JobState.COMPLETED, job.logs()
    tracemalloc.start()
    try:
        got = job.download("big.bin", dest=str(tmp_path / "dl"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got[0].path.stat().st_size == 200 << 20
    assert peak < 16 << 20, f"peak Python allocation {peak / 1e6:.1f} MB while downloading 200 MiB"


def test_download_decides_by_content_and_says_what_it_did(tier: LocalTier, tmp_path: Path) -> None:
    """Issue 29 §1: a local file of the same name and size but other content (an earlier run's
    fixed-format CSV) is neither kept silently nor replaced silently."""
    body = "import pathlib\npathlib.Path('metrics.csv').write_text('step,loss\\n1,0.25\\n')\n"
    job = tier.submit(tier.make_spec(body, name="metrics-run"))
    assert job.wait(timeout=120).state is JobState.COMPLETED, job.logs()
    dest = tmp_path / "nb"
    dest.mkdir()
    (dest / "metrics.csv").write_text("step,loss\n1,0.50\n")  # same size, the first run's data
    [got] = job.download("metrics.csv", dest=str(dest))
    assert got.outcome == "renamed", got.note
    assert got.note.startswith("metrics.csv: saved as metrics (1).csv")
    assert (dest / "metrics.csv").read_text() == "step,loss\n1,0.50\n"
    assert (dest / "metrics (1).csv").read_text() == "step,loss\n1,0.25\n"
    [again] = job.download("metrics.csv", dest=str(dest))
    assert again.outcome == "up to date" and "same sha256" in again.note
    [rep] = job.download("metrics.csv", dest=str(dest), overwrite=True)
    assert rep.outcome == "replaced" and (dest / "metrics.csv").read_text() == "step,loss\n1,0.25\n"
    [same] = job.download("metrics.csv", dest=str(dest))
    assert same.note == "metrics.csv: already up to date (same sha256)"
