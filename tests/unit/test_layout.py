"""docs/architecture.md's statements about the code stay true: its Layout names every folder and
module of jupyter_tiers (each below its folder) and every test folder, its guide to where a new
thing goes names real files, its Architecture pictures are the import-linter layers contract and
the tier and handle classes, and core/model.py holds only immutable values."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import typing
from pathlib import Path

from jupyter_tiers.core import model

ROOT = Path(__file__).resolve().parents[2]


def _architecture_text() -> str:
    """README.md while it holds the Layout section; once README is the front door
    (docs/_tools/front_door.py), the docs page the section moved to."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    if re.search(r"^## Layout$", readme, re.M):
        return readme
    return (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def _layout() -> str:
    text = _architecture_text()
    match = re.search(r"^## Layout\n\n```\n(.*?)^```", text, re.S | re.M)
    assert match, "README.md has no Layout block"
    return match.group(1)


def _folder_block(layout: str, folder: Path, pkg: Path) -> str:
    """The Layout lines below ``folder/``'s own line, up to the next line at its depth or above."""
    rel = folder.relative_to(pkg)
    indent = "  " * len(rel.parts)
    match = re.search(rf"^{indent}{re.escape(rel.name)}/.*\n((?:{indent}  .*\n|\s*\n)*)", layout, re.M)
    assert match, f"the Layout has no line for {rel.as_posix()}/ at depth {len(rel.parts)}"
    return match.group(1)


def test_layout_names_every_module_and_test_folder() -> None:
    """Every module of every folder is named on its own line below its folder's line, one level
    deeper; every test folder is named in tests/'s entry."""
    layout = _layout()
    pkg = ROOT / "jupyter_tiers"
    missing = []
    for path in sorted(pkg.glob("*.py")):
        if path.name != "__init__.py" and not re.search(rf"^  {re.escape(path.name)}\b", layout, re.M):
            missing.append(path.name)
    folders = sorted(p.parent for p in pkg.rglob("__init__.py") if p.parent != pkg)
    for folder in folders:
        block = _folder_block(layout, folder, pkg)
        depth = "  " * (len(folder.relative_to(pkg).parts) + 1)
        for path in sorted(folder.glob("*.py")):
            named = re.search(rf"^{depth}{re.escape(path.name)}\b", block, re.M)
            if path.name != "__init__.py" and not named:
                missing.append(path.relative_to(pkg).as_posix())
    for folder in sorted(p for p in (ROOT / "tests").iterdir() if (p / "__init__.py").exists()):
        if not re.search(rf"\b{folder.name}\b", layout.split("\ntests/", 1)[1]):
            missing.append(f"tests/{folder.name}")
    assert not missing, f"docs/architecture.md's Layout does not name: {missing}"


def test_where_a_new_thing_goes_names_files_that_exist() -> None:
    """The guide to where a new option, parser, verb, view, rule, check or backend goes points at
    real files and folders (a move that forgets it fails here)."""
    text = _architecture_text()
    section = re.search(r"^### Where a new thing goes\n(.*?)(?=^## )", text, re.S | re.M)
    assert section, "docs/architecture.md has no 'Where a new thing goes' section"
    named = re.findall(r"`((?:jupyter_tiers|tests)/[\w/.]+)`", section.group(1))
    assert len(named) >= 10, named
    gone = [n for n in named if not (ROOT / n).exists()]
    assert not gone, f"'Where a new thing goes' names what does not exist: {gone}"


def _mutable_annotation(annotation: object) -> bool:
    origin = typing.get_origin(annotation) or annotation
    if origin in (list, dict, set, bytearray):
        return True
    return any(_mutable_annotation(arg) for arg in typing.get_args(annotation))


def test_model_holds_only_immutable_values() -> None:
    for name, cls in inspect.getmembers(model, inspect.isclass):
        if cls.__module__ != model.__name__:
            continue
        if issubclass(cls, enum.Enum) or (issubclass(cls, tuple) and hasattr(cls, "_fields")):
            continue
        assert dataclasses.is_dataclass(cls), f"model.{name} is neither a dataclass, enum nor NamedTuple"
        assert cls.__dataclass_params__.frozen, f"model.{name} is not frozen"  # type: ignore[attr-defined]
        hints = typing.get_type_hints(cls)
        mutable = [f.name for f in dataclasses.fields(cls) if _mutable_annotation(hints[f.name])]
        assert not mutable, f"model.{name} has mutable fields {mutable} (use tuples)"


def _readme_block(heading: str, index: int) -> str:
    text = _architecture_text()
    section = re.search(rf"^## {heading}\n(.*?)(?=^## )", text, re.S | re.M)
    assert section, f"README.md has no {heading} section"
    blocks = re.findall(r"^```\n(.*?)^```", section.group(1), re.S | re.M)
    assert len(blocks) > index, f"README {heading} has fewer than {index + 1} text pictures"
    return blocks[index]


def _contract_layers() -> list[str]:
    """The layers of pyproject.toml's import-linter layers contract (read without tomllib: Python
    3.10 has none)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    contract = re.search(r'^id = "layers"\n(.*?)^\[', text + "\n[", re.S | re.M)
    assert contract, "pyproject.toml has no layers contract"
    block = re.search(r"^layers = \[\n(.*?)^\]", contract.group(1), re.S | re.M)
    assert block, "the layers contract has no layers list"
    return re.findall(r'^\s*"([^"]+)",', block.group(1), re.M)


def test_architecture_picture_is_the_import_contract() -> None:
    """README's layer picture lists the layers contract's layers, in its order (the text after
    two spaces on a line is a comment; a line of only a comment continues the one above)."""
    pictured = [
        line.split("  ", 1)[0].strip()
        for line in _readme_block("Architecture", 0).splitlines()
        if line.strip() and not line.startswith(" ")
    ]
    assert pictured == _contract_layers()


def test_every_module_sits_in_a_layer_the_layout_names() -> None:
    """Each layer's parts are the package's top-level folders and modules, each named in the
    Layout; the package root holds no module but api.py (a new module goes into a folder)."""
    layout = _layout()
    parts = {p.strip() for layer in _contract_layers() for p in re.split(r"[|:]", layer)}
    pkg = ROOT / "jupyter_tiers"
    modules = {p.stem for p in pkg.glob("*.py") if p.name != "__init__.py"}
    assert modules == {"api"}, f"modules in the package root besides api.py: {modules - {'api'}}"
    modules |= {p.name for p in pkg.iterdir() if (p / "__init__.py").exists()}
    assert parts == modules
    for part in parts:
        assert re.search(rf"^  {re.escape(part)}(\.py\b|/)", layout, re.M), f"Layout lacks {part}"


def test_architecture_picture_of_the_two_kinds_of_work() -> None:
    """``BatchTier   SlurmTier, LocalTier   -> Job  kind "job"``: the tier classes implement their
    base, and the handle each base gives has that registry kind."""
    from jupyter_tiers.engine import array_job, handles, tier
    from jupyter_tiers.k8s.tier import K8sTier
    from jupyter_tiers.local.serve_tier import LocalServeTier
    from jupyter_tiers.local.tier import LocalTier
    from jupyter_tiers.slurm.tier import SlurmTier

    classes: dict[str, type] = {c.__name__: c for c in (
        tier.BatchTier, tier.ServeTier, SlurmTier, LocalTier, K8sTier, LocalServeTier,
        handles.Job, handles.Service, array_job.ArrayJob)}
    rows = [ln for ln in _readme_block("Architecture", 1).splitlines() if ln.strip()]
    assert len(rows) == 2
    concrete = set()
    for row in rows:
        m = re.match(r'(\w+)\s+([\w, ]+?)\s+->\s+(\w+)\s+kind "(\w+)"', row)
        assert m, row
        base, impls, handle, kind = m.groups()
        for name in impls.split(", "):
            assert issubclass(classes[name], classes[base]), f"{name} is not a {base}"
            concrete.add(name)
        assert classes[handle].kind == kind
    assert concrete == {"SlurmTier", "LocalTier", "K8sTier", "LocalServeTier"}
    assert issubclass(array_job.ArrayJob, handles.Job) and "ArrayJob" in rows[0]


#: The longest a module of the package may be (issue 27: past it, a file holds two jobs).
MAX_MODULE_LINES = 700


def test_no_module_is_longer_than_the_limit() -> None:
    long = {p.relative_to(ROOT).as_posix(): n for p in (ROOT / "jupyter_tiers").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by responsibility): {long}"


def test_faces_read_the_registry_only_through_the_layers_below() -> None:
    """The faces (magics, CLI, %tiers, server, widgets) never open or query the registry: what
    they show comes from the service layer (app/) or a handle (issue 27)."""
    pattern = re.compile(r"\bRegistry\(|\.registry\.|\bfind_by_name\(")
    found = []
    for path in sorted((ROOT / "jupyter_tiers" / "faces").rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if pattern.search(code):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_metric_lines_are_parsed_only_where_a_log_is_read() -> None:
    """Issue 27: the faces and the service layer never parse metric lines; a followed log's points
    come from its follower (engine/rank_metrics.py), a log read whole from the Job handle."""
    pattern = re.compile(r"\bMetricsTracker\b|\.feed_sampled\(|\bMetricParser\(")
    found = []
    for folder in ("faces", "app"):
        for path in sorted((ROOT / "jupyter_tiers" / folder).rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(line.split("#", 1)[0]):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
