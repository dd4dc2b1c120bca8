"""Issue 26 HIGH 3, seeded fuzz of the listing check: whatever keys a bucket lists under a
prefix, the local model cache either refuses the listing in one line or every file it would
write resolves inside the cache entry (a stub client: the listing logic is pure)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from jupyter_tiers.data.model_cache import FetchError, _inside, _listing
from jupyter_tiers.data.objectstore import parse_uri

SEED = 20261226
PARTS = ["..", ".", "", "a", "b.bin", "/", "//", "~", "sub", "x y", "..a", "a..", "\x00", "é", ":", "@"]


class Listing:
    """list_objects_v2's paginator over fixed keys."""

    def __init__(self, keys: list[str]) -> None:
        self.keys = keys

    def get_paginator(self, _name: str) -> Listing:
        return self

    def paginate(self, **_kw: Any) -> list[dict[str, Any]]:
        return [{"Contents": [{"Key": k, "Size": 1, "ETag": '"e"'} for k in self.keys]}]


def test_fuzz_listed_keys_never_leave_the_entry(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    uri = parse_uri("s3://jt-bucket/m/")
    entry = tmp_path / "entry"
    target = entry / "m"
    refused = accepted = 0
    for _ in range(3000):
        keys = ["m/" + "/".join(rng.choice(PARTS) for _ in range(rng.randint(1, 5)))
                for _ in range(rng.randint(1, 4))]
        try:
            files = _listing(Listing(keys), uri)
        except FetchError as exc:
            assert "\n" not in str(exc) and str(exc).startswith("--model-from s3://jt-bucket/m/: ")
            refused += 1
            continue
        accepted += 1
        for rel, _, _ in files:
            assert _inside(entry, target / rel), rel
            assert ".." not in rel.split("/") and not rel.startswith("/")
    assert refused > 100 and accepted > 100  # both outcomes were exercised
