"""The views' one state schema (viewstate/schema.py) and the three places held to it: the
widgets' synced traits, the REST ``view`` dict (``checked``) and the lab panel's defaults
(labextension/src/viewDefaults.ts). Each check is shown to fail on a modified copy."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import traitlets as t

from jupyter_tiers.app.viewstate import schema
from jupyter_tiers.app.viewstate.schema import ArrayViewState, JobViewState, ServeViewState
from jupyter_tiers.faces.widgets.array_view import ArrayTable
from jupyter_tiers.faces.widgets.job_view import JobView
from jupyter_tiers.faces.widgets.serve_view import ServeView
from jupyter_tiers.faces.widgets.view_common import schema_mismatches

ROOT = Path(__file__).resolve().parents[2]
PAIRS = [(JobView, JobViewState), (ServeView, ServeViewState), (ArrayTable, ArrayViewState)]


@pytest.mark.parametrize(("widget", "view"), PAIRS, ids=lambda x: x.__name__)
def test_every_synced_trait_is_its_schema_field_with_the_same_default(widget: type, view: type) -> None:
    assert len(dataclasses.fields(view)) > 10
    assert schema_mismatches(widget, view) == []


def test_a_trait_that_drifts_from_the_schema_is_reported() -> None:
    class Drifted(JobView):  # a copy of the widget with one default changed, one trait added
        log_limit = t.Int(4000).tag(sync=True)
        state = t.Int(0).tag(sync=True)
        extra = t.Unicode("").tag(sync=True)

    problems = schema_mismatches(Drifted, JobViewState)
    assert "Drifted.log_limit defaults to 4000, JobViewState.log_limit to 5000" in problems
    assert "Drifted.state is a Int, JobViewState.state a str" in problems
    assert "trait extra is not in JobViewState" in problems
    # and a schema field the widget lacks
    assert "JobViewState.fold_label is not a synced trait of ArrayTable" in schema_mismatches(
        ArrayTable, JobViewState)


def test_the_lab_panel_defaults_are_generated_from_the_schema() -> None:
    text = (ROOT / schema.TYPESCRIPT_PATH).read_text(encoding="utf-8")
    assert schema.typescript_drift(text) == [], (
        "labextension/src/viewDefaults.ts is stale: run `python -m jupyter_tiers.app.viewstate.schema`")
    assert "  log_limit: 5000," in text and "  state: 'UNKNOWN'," in text


def test_a_stale_typescript_copy_is_reported() -> None:
    text = (ROOT / schema.TYPESCRIPT_PATH).read_text(encoding="utf-8")
    edited = text.replace("  elapsed_s: -1,", "  elapsed_s: 0,", 1)
    assert schema.typescript_drift(edited) == ["-  elapsed_s: 0,\n+  elapsed_s: -1,"]
    missing = text.replace("  busy: '',\n", "", 1)
    assert schema.typescript_drift(missing)

    @dataclasses.dataclass(frozen=True)
    class Changed(ArrayViewState):  # the schema's side changed instead
        limit: int = 7

    views = {**schema.VIEWS, "ARRAY_DEFAULTS": Changed}
    assert "+  limit: 7," in "\n".join(schema.typescript_drift(text, views))


def test_typescript_values_are_quoted_for_typescript() -> None:
    @dataclasses.dataclass(frozen=True)
    class Odd:
        text: str = "it's a \\ back"
        items: list[int] = dataclasses.field(default_factory=list)
        on: bool = True

    out = schema.typescript({"ODD": Odd})
    assert "  text: 'it\\'s a \\\\ back'," in out
    assert "  items: []," in out and "  on: true\n};" in out


def test_the_main_writes_the_file_under_a_root(tmp_path: Path) -> None:
    (tmp_path / schema.TYPESCRIPT_PATH).parent.mkdir(parents=True)
    assert schema.main([str(tmp_path)]) == 0
    assert (tmp_path / schema.TYPESCRIPT_PATH).read_text(encoding="utf-8") == schema.typescript()


def test_checked_refuses_an_unknown_field_or_a_wrong_kind() -> None:
    good = {"job_id": "7", "elapsed_s": -1, "terminal": True, "ranks": [["r", "", None, None]]}
    assert schema.checked(JobViewState, good) == good
    with pytest.raises(ValueError, match="JobViewState has no field 'pods'"):
        schema.checked(JobViewState, {"pods": []})
    with pytest.raises(ValueError, match=r"JobViewState.elapsed_s is a int, got bool True"):
        schema.checked(JobViewState, {"elapsed_s": True})
    with pytest.raises(ValueError, match=r"ServeViewState.state is a str, got NoneType"):
        schema.checked(ServeViewState, {"state": None})


def test_the_status_traits_are_schema_fields() -> None:
    """What viewstate's status_traits return (the widgets set them, REST sends them) passes
    ``checked``: each is a field, of its kind."""
    from jupyter_tiers.app.viewstate import job as job_state
    from jupyter_tiers.app.viewstate import serve as serve_state
    from jupyter_tiers.core.model import JobState, JobStatus, ServiceState, ServiceStatus

    job = job_state.status_traits(JobStatus(job_id="1", state=JobState.RUNNING, elapsed_s=3))
    assert schema.checked(JobViewState, job) == job
    svc = serve_state.status_traits(ServiceStatus(name="s", state=ServiceState.READY), now=0.0)
    assert schema.checked(ServeViewState, svc) == svc


def test_checked_fuzz_only_passes_or_says_which_field() -> None:
    """Seeded: random names and values either come back unchanged or raise a ValueError that
    names the schema, never another exception."""
    import random

    rng = random.Random(17)
    names = [f.name for f in dataclasses.fields(ServeViewState)] + ["x", "", "pods ", "__init__"]
    pool: list[object] = ["", "a", 0, -1, 2**40, 1.5, True, None, [], [[1]], {}, {"k": 1}, ("t",)]
    for _ in range(2000):
        values = {rng.choice(names): rng.choice(pool) for _ in range(rng.randint(0, 4))}
        try:
            assert schema.checked(ServeViewState, values) == values
        except ValueError as exc:
            assert str(exc).startswith("ServeViewState")
