"""The two halves every ``show_*`` of display.py shares: the text view and the widget."""

from __future__ import annotations

from pathlib import Path

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


@pytest.mark.parametrize("status", ["READY", None])
def test_widget_is_displayed_and_its_summary_printed_after_wait(
        status: str | None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[object] = []
    monkeypatch.setattr("IPython.display.display", lambda obj, **_: shown.append(obj))
    widget = object()
    waited: list[float | None] = []

    def wait(timeout: float | None) -> str | None:
        waited.append(timeout)
        return status

    result = display_module._show_widget(widget, wait, 5.0, lambda s: f"summary of {s}")
    # Issue 21: the summary is not printed (JupyterLab showed it twice: in the widget and under
    # it); it goes out as a bundle whose plain text only a text-only front end shows.
    summary = [display_module.plain_only("summary of READY")] if status else []
    assert shown == [widget, *summary] and waited == [5.0] and result == status
    assert capsys.readouterr().out == ""
    assert display_module._show_widget(widget, None, 5.0, lambda s: "never") is None
    assert shown == [widget, *summary, widget] and waited == [5.0]
    assert capsys.readouterr().out == ""


def test_plain_only_is_text_for_a_console_and_html_the_widget_css_hides() -> None:
    bundle = display_module.plain_only("job 7 <COMPLETED> & on node1")
    assert bundle["text/plain"] == "job 7 <COMPLETED> & on node1"
    # Escaped text in the element job_view.css hides after a rendered widget.
    assert bundle["text/html"] == '<pre class="jt-plain-summary">job 7 &lt;COMPLETED&gt; &amp; on node1</pre>'
    css = (Path(display_module.__file__).parent / "widgets" / "job_view.css").read_text()
    assert ".jp-OutputArea-child:has(.jt-job) + .jp-OutputArea-child .jt-plain-summary" in css
