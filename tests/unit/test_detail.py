"""A record's detail: each owner's entries survive the others' writes, and damage reads as empty."""

from __future__ import annotations

import json
import random

from jupyter_tiers.batch.arrays import detail_counts, with_counts
from jupyter_tiers.core.detail import entries, with_entries
from jupyter_tiers.data.handoff import (
    decode_detail,
    encode_detail,
    task_uploads,
    upload_of,
    with_task_upload,
    with_upload,
)


def test_owners_keep_each_others_entries() -> None:
    detail = encode_detail("/ck", "/ck/step-9.pt")
    detail = with_upload(detail, {"state": "done"})
    detail = with_counts(detail, "2 COMPLETED")
    detail = with_task_upload(detail, 1, {"state": "uploading"})
    detail = with_task_upload(detail, 3, {"state": "done"})
    assert decode_detail(detail) == ("/ck", "/ck/step-9.pt")
    assert upload_of(detail) == {"state": "done"}
    assert detail_counts(detail) == "2 COMPLETED"
    assert task_uploads(detail) == {1: {"state": "uploading"}, 3: {"state": "done"}}


def test_damaged_or_foreign_detail_reads_as_empty_and_is_replaced_whole() -> None:
    for bad in (None, "", "not json", "[1, 2]", '"text"', "3", "{"):
        assert entries(bad) == {}
        assert json.loads(with_entries(bad, tasks="1 RUNNING")) == {"tasks": "1 RUNNING"}
        assert decode_detail(bad) == (None, None) and upload_of(bad) is None


def test_entries_never_raise_on_random_text() -> None:
    rng = random.Random(17)
    alphabet = '{}[]":,0123456789abcdeftrunl \\\n'
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        got = entries(text)
        assert isinstance(got, dict)
        assert entries(with_entries(text, upload={"state": "x"}))["upload"] == {"state": "x"}
