"""The README's statements about the code stay true: its Layout section names every module and
package of jupyter_tiers and every test folder, and model.py holds only immutable values."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import typing
from pathlib import Path

from jupyter_tiers import model

ROOT = Path(__file__).resolve().parents[2]


def _layout() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^## Layout\n\n```\n(.*?)^```", text, re.S | re.M)
    assert match, "README.md has no Layout block"
    return match.group(1)


def test_layout_names_every_module_and_test_folder() -> None:
    layout = _layout()
    pkg = ROOT / "jupyter_tiers"
    missing = []
    for path in sorted(pkg.glob("*.py")):
        if path.name != "__init__.py" and not re.search(rf"(?<![\w/]){re.escape(path.name)}\b", layout):
            missing.append(path.name)
    for sub in sorted(p for p in pkg.iterdir() if (p / "__init__.py").exists()):
        if f"{sub.name}/" not in layout:
            missing.append(f"{sub.name}/")
    for sub in ("transport", "local"):
        block = layout.split(f"  {sub}/", 1)[1]
        for path in sorted((pkg / sub).glob("*.py")):
            if path.name != "__init__.py" and not re.search(rf"^    {re.escape(path.name)}\b", block, re.M):
                missing.append(f"{sub}/{path.name}")
    for folder in sorted(p for p in (ROOT / "tests").iterdir() if (p / "__init__.py").exists()):
        if not re.search(rf"\b{folder.name}\b", layout.split("tests/", 1)[1]):
            missing.append(f"tests/{folder.name}")
    assert not missing, f"README Layout does not mention: {missing}"


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
