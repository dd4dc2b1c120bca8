"""Where a test run's time goes: each test's setup + call + teardown summed by group (its folder
under tests/). The conftest writes one JSON file per pytest process; ``python -m tests.durations
FILE...`` prints one table for several (tests/run.sh runs the Slurm lane and the rest at once)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path


def group_of(nodeid: str) -> str:
    """The group of a test: its folder under tests/ (``tests/cluster/test_x.py::t`` -> ``cluster``)."""
    parts = nodeid.split("::")[0].split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0]


def group_table(durations: dict[str, float]) -> list[tuple[str, int, float]]:
    """(group, tests, seconds) per group, slowest first."""
    groups: dict[str, list[float]] = {}
    for nodeid, seconds in durations.items():
        groups.setdefault(group_of(nodeid), []).append(seconds)
    return sorted(((g, len(v), sum(v)) for g, v in groups.items()), key=lambda row: (-row[2], row[0]))


def format_table(table: list[tuple[str, int, float]]) -> list[str]:
    lines = [f"{group:<22} {count:>5} tests {seconds:>8.1f} s" for group, count, seconds in table]
    count, seconds = sum(n for _, n, _ in table), sum(s for _, _, s in table)
    lines.append(f"{'total':<22} {count:>5} tests {seconds:>8.1f} s")
    return lines


def to_json(durations: dict[str, float], wall: float | None = None) -> str:
    table = group_table(durations)
    return json.dumps({"wall_seconds": None if wall is None else round(wall, 1),
                       "groups": {g: {"tests": n, "seconds": round(s, 1)} for g, n, s in table},
                       "tests": {k: round(v, 2) for k, v in sorted(durations.items())}}, indent=1) + "\n"


def merged(paths: Iterable[Path]) -> dict[str, float]:
    """The per-test durations of several files (a file that is missing or unreadable adds none)."""
    out: dict[str, float] = {}
    for path in paths:
        try:
            out.update(json.loads(path.read_text())["tests"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv]
    durations = merged(paths)
    if not durations:
        print("no test durations recorded", file=sys.stderr)
        return 1
    print("[run] time by group (setup + call + teardown, summed over the lanes):")
    for line in format_table(group_table(durations)):
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
