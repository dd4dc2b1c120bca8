"""The one schema of the views' synced state: a frozen dataclass per view whose fields are the
traits the view's front end reads (name, type, default).

Everything else is held to it: the widgets' traitlets (tests/unit/test_view_schema.py), the
REST details ``view`` dict (``checked``, service.details) and the lab panel's defaults,
labextension/src/viewDefaults.ts, written from here (``typescript``; run
``python -m jupyter_tiers.app.viewstate.schema`` after changing a field) and compared by a test.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class JobViewState:
    """JobView (widgets/job_view.py, job_view.js): one job."""

    job_id: str = ""
    job_name: str = ""
    profile: str = ""
    tier_kind: str = ""
    state: str = "PENDING"
    reason: str = ""
    start_time: str = ""
    elapsed: str = ""
    elapsed_s: int = -1
    nodelist: str = ""
    checkpoint: str = ""
    restarts: int = 0
    world_size: int = 0
    ranks_per_node: int = 0
    ranks: list[list[Any]] = field(default_factory=list)
    node_usage: dict[str, Any] = field(default_factory=dict)
    straggler: str = ""
    stalled: str = ""
    first_failure: int = -1
    message: str = ""
    terminal: bool = False
    summary: str = ""
    script: str = ""
    log_limit: int = 5000
    lines_received: int = 0
    cancel_requested: bool = False
    stacks_text: str = ""
    stacks_busy: bool = False
    log_skipped_bytes: int = 0
    fold_label: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    metrics_rank: int = 0
    metrics_note: str = ""
    files: list[list[Any]] = field(default_factory=list)
    files_note: str = ""
    downloads: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ServeViewState:
    """ServeView (widgets/serve_view.py, serve_view.js): one service."""

    service_name: str = ""
    profile: str = ""
    namespace: str = ""
    tier_kind: str = ""
    image: str = ""
    model_source: str = ""
    yaml: str = ""
    state: str = "UNKNOWN"
    reason: str = ""
    revision: str = ""
    endpoint: str = ""
    age_s: int = -1
    desired: int = 0
    updated: int = 0
    ready: int = 0
    available: int = 0
    pods: list[list[Any]] = field(default_factory=list)
    events: list[list[Any]] = field(default_factory=list)
    banner: str = ""
    settled: bool = False
    terminal: bool = False
    summary: str = ""
    canary: str = ""
    canary_counts: list[int] = field(default_factory=list)
    message: str = ""
    busy: str = ""
    scale_target: int = -1
    forward_url: str = ""
    try_openai: str = ""
    try_models: list[str] = field(default_factory=list)
    try_note: str = ""
    log_limit: int = 5000
    lines_received: int = 0


@dataclass(frozen=True)
class ArrayViewState:
    """ArrayView's task table (widgets/array_view.py ArrayTable, array_view.js): one array."""

    array_id: str = ""
    array_name: str = ""
    profile: str = ""
    tier_kind: str = ""
    sweep: bool = False
    limit: int = 0
    state: str = "PENDING"
    counts: str = ""
    tasks: list[list[Any]] = field(default_factory=list)
    selected: int = -1
    terminal: bool = False
    summary: str = ""
    cancel_requested: bool = False
    message: str = ""


#: Each view's schema under the name of the constant the lab panel reads (adapter.ts).
VIEWS: dict[str, type] = {
    "JOB_DEFAULTS": JobViewState,
    "SERVE_DEFAULTS": ServeViewState,
    "ARRAY_DEFAULTS": ArrayViewState,
}

#: Where the lab panel's copy lives, relative to the repository.
TYPESCRIPT_PATH = Path("labextension") / "src" / "viewDefaults.ts"


def field_types(view: type) -> dict[str, type]:
    """Each field's JSON kind (str, int, bool, list or dict), in declaration order."""
    hints = typing.get_type_hints(view)
    return {f.name: typing.get_origin(hints[f.name]) or hints[f.name] for f in dataclasses.fields(view)}


def defaults(view: type) -> dict[str, Any]:
    """Each field's default (a fresh list or dict for those), in declaration order."""
    return {f.name: getattr(view(), f.name) for f in dataclasses.fields(view)}


def _kind_ok(kind: type, value: Any) -> bool:
    if kind is int:  # JSON has no bool/int distinction worth keeping, Python does
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def checked(view: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` as a plain dict after checking each name is a field of ``view`` and each value
    is of the field's kind (ValueError naming the field otherwise): a REST ``view`` dict cannot
    carry a trait the widget does not have."""
    kinds = field_types(view)
    for name, value in values.items():
        if name not in kinds:
            raise ValueError(f"{view.__name__} has no field {name!r} (it has {', '.join(kinds)})")
        if not _kind_ok(kinds[name], value):
            raise ValueError(f"{view.__name__}.{name} is a {kinds[name].__name__}, "
                             f"got {type(value).__name__} {value!r}")
    return dict(values)


def _ts_value(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return json.dumps(value)


def typescript(views: Mapping[str, type] = VIEWS) -> str:
    """The text of labextension/src/viewDefaults.ts: each view's defaults as a constant."""
    out = ["// GENERATED by `python -m jupyter_tiers.app.viewstate.schema` from",
           "// jupyter_tiers/app/viewstate/schema.py: edit that, then run it again.", ""]
    for const, view in views.items():
        out.append(f"/** {view.__name__}'s fields with their defaults (the notebook widget's traits). */")
        out.append(f"export const {const}: Record<string, unknown> = {{")
        items = list(defaults(view).items())
        for i, (name, value) in enumerate(items):
            out.append(f"  {name}: {_ts_value(value)}" + ("," if i < len(items) - 1 else ""))
        out.append("};")
        out.append("")
    return "\n".join(out)


def typescript_drift(text: str, views: Mapping[str, type] = VIEWS) -> list[str]:
    """The lines where ``text`` (a viewDefaults.ts) and ``typescript(views)`` differ, as
    ``-have`` / ``+want`` pairs; empty when the file is current."""
    have, want = text.splitlines(), typescript(views).splitlines()
    if have == want:
        return []
    drift = [f"-{h}\n+{w}" for h, w in zip(have, want, strict=False) if h != w]
    if len(have) != len(want):
        drift.append(f"{len(have)} lines, want {len(want)}")
    return drift


def main(argv: list[str] | None = None) -> int:
    """Write viewDefaults.ts under the repository root given (default: the working directory)."""
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0] if args else ".") / TYPESCRIPT_PATH
    target.write_text(typescript(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
