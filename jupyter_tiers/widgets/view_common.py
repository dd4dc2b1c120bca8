"""Each view's ES module (its helpers, view_common.js, the view: the order in views.json), and the
check that a widget's synced traits are its view's schema (viewstate/schema.py)."""

from __future__ import annotations

import json
from pathlib import Path

import anywidget
import traitlets as t

from ..viewstate import schema

_HERE = Path(__file__).parent

#: The JSON kind each traitlet type syncs as.
_KINDS: dict[type, type] = {t.Unicode: str, t.Int: int, t.Bool: bool, t.List: list, t.Dict: dict}


def module_files(name: str, *, lab_panel: bool = False) -> list[str]:
    """The files one view's ES module is made of, in order (views.json, which the lab panel's
    build reads too): its helpers, view_common.js, the view; ``lab_panel``: without the helpers
    the lab panel leaves out."""
    manifest = json.loads((_HERE / "views.json").read_text(encoding="utf-8"))
    view = manifest["views"][name]
    omit = set(view["lab_panel_omits"]) if lab_panel else set()
    return [f for f in view["helpers"] if f not in omit] + [manifest["common"], name]


def view_module(name: str) -> str:
    """The ES module text of one view (``module_files``), as anywidget gets it."""
    return "\n".join((_HERE / f).read_text(encoding="utf-8") for f in module_files(name))


def schema_mismatches(widget: type[anywidget.AnyWidget], view: type) -> list[str]:
    """How ``widget``'s own synced traits differ from the fields of ``view`` (a frozen dataclass
    of viewstate/schema.py): a trait or field missing on one side, another kind or default.
    Empty when they agree."""
    base = set(anywidget.AnyWidget.class_traits(sync=True))
    traits = {n: tr for n, tr in widget.class_traits(sync=True).items() if n not in base}
    kinds, defaults = schema.field_types(view), schema.defaults(view)
    problems = [f"trait {n} is not in {view.__name__}" for n in traits if n not in kinds]
    problems += [f"{view.__name__}.{n} is not a synced trait of {widget.__name__}"
                 for n in kinds if n not in traits]
    for name in kinds.keys() & traits.keys():
        trait = traits[name]
        kind = next((k for cls, k in _KINDS.items() if isinstance(trait, cls)), None)
        if kind is not kinds[name]:
            problems.append(f"{widget.__name__}.{name} is a {type(trait).__name__}, "
                            f"{view.__name__}.{name} a {kinds[name].__name__}")
        elif trait.default() != defaults[name]:
            problems.append(f"{widget.__name__}.{name} defaults to {trait.default()!r}, "
                            f"{view.__name__}.{name} to {defaults[name]!r}")
    return sorted(problems)
