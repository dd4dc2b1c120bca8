"""Each view's ES module for anywidget (the view's file and what it imports, linked by
esm_link.py), and the check that a widget's synced traits are its view's schema
(viewstate/schema.py)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anywidget
import traitlets as t

from ...app.viewstate import schema
from .esm_link import link

_HERE = Path(__file__).parent

#: The JSON kind each traitlet type syncs as.
_KINDS: dict[type, type] = {t.Unicode: str, t.Int: int, t.Bool: bool, t.List: list, t.Dict: dict}


#: How long a live view that a page has shown may go unseen (no page said "hello" or "seen", which
#: a rendered view sends every 60 s: view_common.js's jtSeen) before it stops sending its
#: updates. Every message a kernel sends counts as the server's activity, so a widget still
#: following a running job after the browser closed would keep a hub's idle culler from ever
#: stopping that server; paused, the kernel goes quiet and the server is culled on time. A page
#: that shows the view again says "hello" and gets everything at once.
UNSEEN_AFTER_S = 150.0
#: An admin's (or a test's) setting of it, in whole seconds (the class hub passes it on).
UNSEEN_ENV = "JUPYTER_TIERS_UNSEEN_AFTER"


def unseen_after() -> float:
    """:data:`UNSEEN_AFTER_S`, or the whole number of seconds (at least 10) :data:`UNSEEN_ENV` gives."""
    value = os.environ.get(UNSEEN_ENV, "")
    return max(10.0, float(value)) if value.isdigit() else UNSEEN_AFTER_S


class SeenGate:
    """Whether a live view is still on a page. Before any page has shown it (a headless run,
    nbclient, the Python API alone) it never pauses: there is no browser whose absence to notice."""

    def __init__(self, after: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.after = unseen_after() if after is None else after
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: float | None = None  # when a page last said it shows the view
        self._paused = False

    def seen(self) -> bool:
        """A page shows the view now; True when the view had paused (send it everything again)."""
        with self._lock:
            self._seen = self._clock()
            was, self._paused = self._paused, False
            return was

    @property
    def paused(self) -> bool:
        """True once a page showed the view and none has for ``after`` seconds."""
        with self._lock:
            if not self._paused and self._seen is not None and self._clock() - self._seen > self.after:
                self._paused = True
            return self._paused


def view_module(name: str) -> str:
    """The ES module text anywidget gets for the view ``name`` (e.g. ``job_view.js``): the view's
    module with every module it imports from this directory linked in, its default export the
    view's."""
    return link(name, lambda file: (_HERE / file).read_text(encoding="utf-8"))


def view_css(*names: str) -> str:
    """The CSS anywidget gets for a view: the named files of this directory (``vendor/uplot.css``
    included), in order, as one text."""
    return "\n".join((_HERE / name).read_text(encoding="utf-8") for name in names)


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
