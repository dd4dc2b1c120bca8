"""The rank grid's pure logic (widgets/rank_grid.js, run by node) and the widget state it reads:
node rows from the rank files' nodes, the nodelist and ranks per node; counts per phase; the
hostlist expansion checked against the Python one on seeded random hostlists."""

from __future__ import annotations

import json
import random
from typing import Any

from jupyter_tiers.app.viewstate.job import ranks_per_node
from jupyter_tiers.slurm.parse import expand_hostlist
from tests.unit.widget_js import run_module


def run_js(body: str) -> Any:
    """Run ``body`` after importing rank_grid.js's helpers, in node; it prints one JSON value."""
    return run_module('import { jtExpandHostlist, jtGroupRanks, jtCountPhases, jtCountText } '
                      'from "./rank_grid.js";\n' + body, "rank grid JS tests")


def rows(ranks: list[list[Any]], nodelist: str = "", per_node: int = 0) -> list[tuple[str, bool, list[int]]]:
    out = run_js(f"console.log(JSON.stringify(jtGroupRanks({json.dumps(ranks)}, "
                 f"{json.dumps(nodelist)}, {per_node})));")
    return [(r["name"], r["named"], r["ranks"]) for r in out]


def test_the_seed_shape_is_32_node_rows_of_8_named_by_the_rank_files() -> None:
    ranks = [["r", f"local{i // 8}", None, None] for i in range(256)]
    ranks[137] = ["f", "local17", 7, None]
    got = rows(ranks, "local[0-31]", 8)
    assert [name for name, _, _ in got] == [f"local{k}" for k in range(32)]
    for k, (_, named, members) in enumerate(got):
        assert named and members == list(range(8 * k, 8 * k + 8))


def test_pending_rows_come_from_ranks_per_node_then_the_nodelist() -> None:
    waiting = [["w", "", None, None] for _ in range(16)]
    # PENDING: no nodelist yet, rows of 8 unnamed slots
    assert rows(waiting, "", 8) == [("#1", False, list(range(8))), ("#2", False, list(range(8, 16)))]
    # allocated, ranks not started: Slurm's block distribution over the nodelist
    assert rows(waiting, "gpu[07-08]", 8) == [("gpu07", True, list(range(8))),
                                              ("gpu08", True, list(range(8, 16)))]
    # without ranks per node, the nodelist's length decides; without either, one row
    assert [len(m) for _, _, m in rows(waiting, "a,b,c,d", 0)] == [4, 4, 4, 4]
    assert rows(waiting, "", 0) == [("#1", False, list(range(16)))]


def test_a_rank_sits_on_the_node_its_file_names_and_rows_follow_the_nodelist_order() -> None:
    ranks = [["r", "n2", None, None], ["w", "", None, None], ["r", "n1", None, None],
             ["r", "extra", None, None]]
    # rank 1 has not started: placed by distribution (2 per node -> n2's row); rank 2 reported n1
    assert rows(ranks, "n2,n1", 2) == [("n2", True, [0, 1]), ("n1", True, [2]), ("extra", True, [3])]


def test_counts_per_phase_and_their_text() -> None:
    out = run_js("""
const ranks = [];
for (let i = 0; i < 250; i++) ranks.push(["r", "n", null, null]);
ranks.push(["f", "n", 1, null]);
for (let i = 0; i < 5; i++) ranks.push(["x", "n", 0, null]);
ranks.push(["?", "n", null, null], null);
const counts = jtCountPhases(ranks);
console.log(JSON.stringify([counts, jtCountText(counts), jtCountText(jtCountPhases([]))]));
""")
    assert out == [{"w": 0, "r": 250, "x": 5, "f": 1, "s": 0}, "250 running, 5 exited, 1 failed", ""]


def _random_hostlist(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 4)):
        prefix = rng.choice(["node", "gpu-a", "n", "c1r"])
        if rng.random() < 0.3:
            parts.append(prefix + str(rng.randint(0, 99)))
            continue
        ranges = []
        for _ in range(rng.randint(1, 3)):
            lo = rng.randint(0, 40)
            width = rng.choice([0, 0, 2, 3])
            hi = lo + rng.randint(0, 12)
            first, last = str(lo).zfill(width), str(hi).zfill(width)
            ranges.append(first if rng.random() < 0.3 else f"{first}-{last}")
        parts.append(f"{prefix}[{','.join(ranges)}]{rng.choice(['', '', '-ib'])}")
    return ",".join(parts)


def test_fuzz_hostlist_expansion_matches_the_python_parser() -> None:
    rng = random.Random(1101)
    lists = [_random_hostlist(rng) for _ in range(300)]
    got = run_js(f"console.log(JSON.stringify({json.dumps(lists)}.map((t) => jtExpandHostlist(t))));")
    for text, names in zip(lists, got, strict=True):
        assert names == expand_hostlist(text), text


def test_fuzz_grouping_places_every_rank_once_and_never_throws() -> None:
    """Random rank cells, nodelists (hostile ranges and garbage too) and ranks per node: every
    rank lands in exactly one row, in ascending order within it, and no row is empty."""
    rng = random.Random(1102)
    alphabet = "n[]-,0123456789x "
    cases = []
    for _ in range(300):
        n = rng.randint(0, 80)
        names = [rng.choice(["", "", "n1", "n2", "n3", "gpu[1]", "<b>x</b>"]) for _ in range(n)]
        ranks = [[rng.choice("wrxfs"), names[i], rng.choice([None, 0, 1]), None] for i in range(n)]
        nodelist = rng.choice(["", "n[1-3]", "n[0-999999999]",
                               "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))])
        cases.append([ranks, nodelist, rng.choice([0, 1, 3, 8, -1, 1000])])
    out = run_js(f"""
const cases = {json.dumps(cases)};
const grouped = cases.map(([r, l, p]) => jtGroupRanks(r, l, p).map((row) => [row.name, row.ranks]));
console.log(JSON.stringify(grouped));
""")
    for (ranks, _nodelist, _per), got in zip(cases, out, strict=True):
        placed = [i for _, members in got for i in members]
        assert sorted(placed) == list(range(len(ranks)))
        assert all(members and members == sorted(members) for _, members in got)
        for name, members in got:  # a started rank sits in its own node's row
            assert all(ranks[i][1] in ("", name) for i in members)
        assert len(got) <= max(1, len(ranks))


def test_ranks_per_node_from_a_record_spec() -> None:
    assert ranks_per_node({"nodes": 32, "ntasks_per_node": 8}, 256) == 8
    assert ranks_per_node({"nodes": 2, "launcher": "torchrun", "nproc_per_node": 4}, 8) == 4
    assert ranks_per_node({"nodes": 3}, 8) == 0  # uneven: unknown
    assert ranks_per_node({}, 8) == 0
    assert ranks_per_node({"nodes": True}, 8) == 0
    assert ranks_per_node({"nodes": "2"}, 8) == 0
    assert ranks_per_node(None, 8) == 0
    assert ranks_per_node({"nodes": 2}, 0) == 0


def usage_js(cells: list[Any]) -> list[list[Any]]:
    """[jtUsageLevel, jtUsageText] of each usage cell (usage.py usage_cell), run in node."""
    return run_module('import { jtUsageLevel, jtUsageText } from "./rank_grid.js";\n'
                      f"const cells = {json.dumps(cells)};\n"
                      "console.log(JSON.stringify(cells.map((c) => [jtUsageLevel(c), jtUsageText(c)])));",
                      "rank grid usage JS tests")


def test_usage_level_and_numbers_of_a_rank_or_node() -> None:
    got = usage_js([[97.3, 2048.0, None, None], [30, 1.0, 88, 40960.0], [250, 512, None, None],
                    None, [None, None, None, None], [0, 0, 0, 0]])
    assert got[0] == [0.973, "CPU 97 % · RSS 2.0 GiB"]
    assert got[1] == [0.88, "CPU 30 % · RSS 1 MiB · GPU 88 % · GPU mem 40.0 GiB"]  # GPU decides
    assert got[2][0] == 1  # four cores busy: as busy as it gets
    assert got[3] == [None, ""] and got[4] == [None, ""]
    assert got[5] == [0, "CPU 0 % · RSS 0 MiB · GPU 0 % · GPU mem 0 MiB"]


def test_fuzz_usage_helpers_never_throw() -> None:
    rng = random.Random(28)
    values: list[Any] = [None, 0, -5, 1e308, "x", [], {}, True, 12.5, 100]
    cells = [rng.choice([None, "junk", 5, [rng.choice(values) for _ in range(rng.randint(0, 5))]])
             for _ in range(300)]
    for level, text in usage_js(cells):
        assert level is None or 0 <= level <= 1
        assert isinstance(text, str)
