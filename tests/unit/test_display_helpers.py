"""The two halves every ``show_*`` of display.py shares: the text view and the widget."""

from __future__ import annotations

import pytest

from jupyter_tiers import display as display_module


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
    monkeypatch.setattr("IPython.display.display", shown.append)
    widget = object()
    waited: list[float | None] = []

    def wait(timeout: float | None) -> str | None:
        waited.append(timeout)
        return status

    result = display_module._show_widget(widget, wait, 5.0, lambda s: f"summary of {s}")
    assert shown == [widget] and waited == [5.0] and result == status
    assert capsys.readouterr().out == ("summary of READY\n" if status else "")
    assert display_module._show_widget(widget, None, 5.0, lambda s: "never") is None
    assert shown == [widget, widget] and waited == [5.0]
    assert capsys.readouterr().out == ""
