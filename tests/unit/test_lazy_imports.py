"""Imports of the package's own modules sit at module level; one inside a function says why.

A function-level import is kept only for a heavy dependency (anywidget/ipywidgets, tornado,
PyYAML...) or a cycle within a package, with a ``# lazy: <reason>`` comment on its line or the
line before (issue 17).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "jupyter_tiers"
HEAVY = ("kubernetes", "paramiko", "ipywidgets", "anywidget", "torch", "boto3", "tornado", "jupyter_server")


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def function_level_imports(tree: ast.AST) -> list[ast.ImportFrom]:
    """Relative imports inside a function body, outside ``if TYPE_CHECKING:`` blocks."""
    found: list[ast.ImportFrom] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                continue
            if in_function and isinstance(child, ast.ImportFrom) and child.level > 0:
                found.append(child)
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    walk(tree, False)
    return found


def unexplained(source: str) -> list[int]:
    """Line numbers of function-level own-module imports without a ``# lazy:`` reason."""
    lines = source.splitlines()
    bad = []
    for node in function_level_imports(ast.parse(source)):
        here = lines[node.lineno - 1]
        before = lines[node.lineno - 2] if node.lineno >= 2 else ""
        if "# lazy:" not in here and not before.strip().startswith("# lazy:"):
            bad.append(node.lineno)
    return bad


def test_every_function_level_import_gives_a_reason() -> None:
    missing = [f"{path.relative_to(PACKAGE.parent)}:{line}"
               for path in sorted(PACKAGE.rglob("*.py"))
               for line in unexplained(path.read_text(encoding="utf-8"))]
    assert not missing, "function-level imports without a '# lazy: <reason>' comment: " + ", ".join(missing)


def test_the_checker_finds_an_unexplained_import() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .tier import Tier\n"
        "def f():\n    from .api import connect\n    return connect\n"
        "def g():\n    # lazy: a cycle\n    from .api import connect\n    return connect\n"
        "def h():\n    from .widgets import View  # lazy: anywidget\n    return View\n"
    )
    assert unexplained(source) == [5]


def test_load_ext_and_the_service_layer_load_no_heavy_dependency() -> None:
    code = (
        "import sys, jupyter_tiers, jupyter_tiers.faces.magics, jupyter_tiers.app.actions,"
        " jupyter_tiers.faces.cli;"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    env = dict(os.environ, PYTHONPATH=str(PACKAGE.parent))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
