"""The two halves every ``show_*`` of display.py shares: the text view and the widget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.faces import display as display_module


class _View:
    def __init__(self) -> None:
        self.ran: list[float | None] = []

    def header(self) -> str:
        return "job 7 RUNNING"

    def run(self, timeout: float | None = None) -> str | None:
        self.ran.append(timeout)
        return "COMPLETED"


def test_text_view_without_wait_prints_how_to_follow(capsys: pytest.CaptureFixture[str]) -> None:
    view = _View()
    assert display_module._show_text(view, "local/7", False, 3.0) is None
    assert capsys.readouterr().out == "job 7 RUNNING — follow it with %tiers attach local/7\n"
    assert view.ran == []


def test_text_view_with_wait_runs_it(capsys: pytest.CaptureFixture[str]) -> None:
    view = _View()
    assert display_module._show_text(view, "local/7", True, 3.0) == "COMPLETED"
    assert view.ran == [3.0]
    assert capsys.readouterr().out == ""


class _Handle:
    def __init__(self, shown: list[object], obj: object) -> None:
        self.shown, self.obj = shown, obj

    def update(self, obj: object, **_: object) -> None:
        self.shown.append(("update", obj))


class _Widget:
    """A widget's traits, and the observers display.LiveLine registers."""

    def __init__(self) -> None:
        self.state, self.summary = "PENDING", ""
        self.observers: list[Any] = []

    def observe(self, fn: Any, names: list[str]) -> None:
        self.observers.append(fn)

    def set(self, **traits: str) -> None:
        for key, value in traits.items():
            setattr(self, key, value)
            for fn in self.observers:
                fn({"name": key})


@pytest.mark.parametrize("status", ["READY", None])
def test_widget_is_displayed_with_a_line_kept_current(
        status: str | None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41 item 1: a saved notebook kept the state at submission (PENDING for a completed
    job); the plain line under the widget is updated when the state changes and at the end."""
    shown: list[object] = []

    def display(obj: object, **kw: object) -> _Handle:
        shown.append(obj)
        return _Handle(shown, obj)

    monkeypatch.setattr("IPython.display.display", display)
    widget = _Widget()
    waited: list[float | None] = []

    def wait(timeout: float | None) -> str | None:
        waited.append(timeout)
        widget.set(state="RUNNING")
        if status:
            widget.set(state="COMPLETED", summary=f"job 7 {status}")
        return status

    def line() -> str:
        return display_module.live_line(widget.summary, f"job 7: {widget.state}", "7")

    result = display_module._show_widget(widget, wait, 5.0, line, widget, ("state", "summary"))
    plain = display_module.plain_only
    first = plain("(live view: %tiers attach 7)\njob 7: PENDING")
    later = [("update", plain("(live view: %tiers attach 7)\njob 7: RUNNING"))]
    if status:  # the state, then the summary that replaces it
        later.append(("update", plain("(live view: %tiers attach 7)\njob 7: COMPLETED")))
        later.append(("update", plain("(live view: %tiers attach 7)\njob 7 READY")))
    assert shown == [widget, first, *later] and waited == [5.0] and result == status
    assert capsys.readouterr().out == ""
    widget.set(state=widget.state)  # no change: no update
    assert len(shown) == 2 + len(later)


def test_plain_only_is_text_for_a_console_and_html_the_widget_css_hides() -> None:
    bundle = display_module.plain_only("job 7 <COMPLETED> & on node1")
    assert bundle["text/plain"] == "job 7 <COMPLETED> & on node1"
    # Escaped text in the element job_view.css hides after a rendered widget.
    assert bundle["text/html"] == '<pre class="jt-plain-summary">job 7 &lt;COMPLETED&gt; &amp; on node1</pre>'
    css = (Path(display_module.__file__).parent / "widgets" / "job_view.css").read_text()
    assert ".jp-OutputArea-child:has(.jt-job) + .jp-OutputArea-child .jt-plain-summary" in css
