"""The pure parts of ``--checkpoint-to`` on arrays: which records are tasks, the tasks' upload
entries in the array record's ``detail`` (kept beside its counts line, whatever writes first),
the summary's upload text (best task first), and a seeded fuzz of the detail reader."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace

from jupyter_tiers.batch.arrays import detail_counts, record_counts, with_counts
from jupyter_tiers.config.registry import JobRecord, Registry
from jupyter_tiers.data.checkpoint_upload import task_of, task_order, uploads_text
from jupyter_tiers.data.handoff import task_upload_of, task_uploads, with_task_upload

SEED = 16016


def rec(job_id: str, **spec: object) -> SimpleNamespace:
    return SimpleNamespace(profile="hpc", job_id=job_id, spec=spec)


def test_task_of_names_the_array_and_index_only_for_an_arrays_task() -> None:
    assert task_of(rec("51_7", array="0-9", checkpoint_to="store")) == ("hpc/51", 7)
    assert task_of(rec("51_7", sweep="lr=1,2")) == ("hpc/51", 7)
    assert task_of(rec("51", array="0-9")) is None  # the whole array
    assert task_of(rec("51_7")) is None  # not an array's spec
    assert task_of(rec("51_x", array="0-9")) is None
    assert task_of(rec("_7", array="0-9")) is None


def test_task_uploads_and_counts_keep_each_other_in_one_detail() -> None:
    detail = with_counts(None, "3 tasks: 3 RUNNING")
    detail = with_task_upload(detail, 2, {"state": "uploading", "uri": "s3://b/k"})
    detail = with_counts(detail, "3 tasks: 3 COMPLETED")
    detail = with_task_upload(detail, 0, {"state": "done", "uri": "s3://b/j"})
    assert detail_counts(detail) == "3 tasks: 3 COMPLETED"
    assert task_upload_of(detail, 2) == {"state": "uploading", "uri": "s3://b/k"}
    assert task_upload_of(detail, 1) is None
    assert sorted(task_uploads(detail)) == [0, 2]


def test_record_counts_keeps_the_uploads_in_the_registry(tmp_path: Path) -> None:
    registry = Registry(tmp_path / "r.sqlite")
    registry.add(JobRecord(profile="hpc", tier="slurm", job_id="51", name="sw", jobdir="/j",
                           world_size=1, state="RUNNING", spec={"array": "0-2"}))
    registry.change_detail("hpc/51", lambda d: with_task_upload(d, 1, {"state": "done", "uri": "s3://b/x"}))
    record_counts(registry, "hpc/51", "COMPLETED", "3 tasks: 3 COMPLETED")
    got = registry.get("hpc/51")
    assert got.state == "COMPLETED" and detail_counts(got.detail) == "3 tasks: 3 COMPLETED"
    assert task_upload_of(got.detail, 1) == {"state": "done", "uri": "s3://b/x"}
    registry.change_detail("hpc/404", lambda d: "never")  # no such record: nothing, no error


def test_uploads_text_lists_done_uris_best_first_then_what_is_not_done() -> None:
    uploads = {
        0: {"state": "done", "uri": "s3://b/sw/51_0/c/"},
        3: {"state": "done", "uri": "s3://b/sw/51_3/c/"},
        5: {"state": "failed", "uri": "s3://b/sw/51_5/c", "error": "access denied"},
        6: {"state": "uploading", "uri": "s3://b/sw/51_6/c", "sent": 5_000_000, "total": 10_000_000},
    }
    assert uploads_text(uploads, best=3) == (
        "checkpoints s3://b/sw/51_3/c/ (task 3, best), s3://b/sw/51_0/c/ (task 0); "
        "task 5 upload failed: access denied; task 6 uploading 50% (5.0/10.0 MB)")
    assert uploads_text({}, best=None) == ""
    many = {i: {"state": "done", "uri": f"s3://b/{i}"} for i in range(6)}
    assert uploads_text(many, best=4).endswith("s3://b/4 (task 4, best), s3://b/0 (task 0), "
                                               "s3://b/1 (task 1) and 3 more")
    assert task_order([0, 1, 2, 3], 2) == [2, 0, 1, 3] and task_order([0, 1], None) == [0, 1]


def _junk(rng: random.Random, depth: int = 0) -> object:
    pick = rng.randrange(8 if depth < 3 else 5)
    if pick == 0:
        return rng.choice([None, True, 0, -1, 1.5, float("nan")])
    if pick == 1:
        return "".join(rng.choice("0123456789_-x\u00e9 \x00\n") for _ in range(rng.randrange(9)))
    if pick == 2:
        return rng.choice(["done", "uploading", "failed", "s3://b/k", ""])
    if pick in (3, 4):
        return rng.randrange(-3, 10**8)
    if pick == 5:
        return [_junk(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = ["state", "uri", "sent", "total", "error", str(rng.randrange(12)), str(_junk(rng, depth + 1))]
    return {rng.choice(keys): _junk(rng, depth + 1) for _ in range(rng.randrange(6))}


def test_fuzz_task_upload_readers_never_raise_and_text_is_one_line() -> None:
    rng = random.Random(SEED)
    for _ in range(6000):
        shape = rng.randrange(4)
        if shape == 0:
            detail: str | None = "".join(chr(rng.randrange(32, 0x250)) for _ in range(rng.randrange(40)))
        elif shape == 1:
            detail = json.dumps({"tasks": "x", "uploads": _junk(rng)})
        elif shape == 2:
            detail = json.dumps(_junk(rng))
        else:
            detail = None
        uploads = task_uploads(detail)
        assert all(isinstance(k, int) and k >= 0 and isinstance(v, dict) for k, v in uploads.items())
        task_upload_of(detail, rng.randrange(12))
        text = uploads_text(uploads, best=rng.choice([None, *uploads]))
        assert "\n" not in text
        assert detail_counts(with_counts(detail, "n")) == "n"
