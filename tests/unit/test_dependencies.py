"""Every third-party package that jupyter_tiers imports is declared in pyproject.toml, so a fresh
install has it (jupyter_core was imported but only arrived through jupyter-server)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


# Programs run by another interpreter (the login node's python), whose imports that python needs,
# and modules used only with an optional extra (checked below to be declared in that extra): the
# checkpoint uploader, the doctor's object-store check (run where uploads run) and the local
# serving tier's model download need boto3 (the `s3` extra).
OTHER_INTERPRETER = {"data/s3_upload.py", "data/model_cache.py", "doctor/s3_check_script.py"}
S3_EXTRA = {"boto3"}


def _imported_top_level_modules() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "jupyter_tiers").rglob("*.py"):
        if path.relative_to(ROOT / "jupyter_tiers").as_posix() in OTHER_INTERPRETER:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"jupyter_tiers", "__future__"}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_imported_package_is_declared() -> None:
    # The [project] dependencies list, read without tomllib (Python 3.10 has none).
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M)
    assert block, "no dependencies list in pyproject.toml"
    deps = re.findall(r'^\s*"([^"]+)"', block.group(1), re.M)
    declared = {_normal(re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0]) for dep in deps}
    assert "paramiko" in declared
    providers = importlib.metadata.packages_distributions()
    missing = {}
    for module in sorted(_imported_top_level_modules()):
        dists = {_normal(d) for d in providers.get(module, [])}
        if not dists & declared:
            missing[module] = sorted(dists) or ["(not installed)"]
    assert not missing, f"imported by jupyter_tiers but not in [project] dependencies: {missing}"


def test_the_s3_extra_declares_what_the_object_storage_modules_import() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    extra = re.search(r"^s3 = \[(.*?)\]", text, re.M)
    assert extra, "no s3 extra in pyproject.toml"
    deps = re.findall(r'"([^"]+)"', extra.group(1))
    declared = {_normal(re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0]) for d in deps}
    for name in OTHER_INTERPRETER:
        tree = ast.parse((ROOT / "jupyter_tiers" / name).read_text(encoding="utf-8"))
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                    for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree)
                     if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module}
        # jupyter_core is a core dependency; botocore comes with boto3.
        third_party = imported - set(sys.stdlib_module_names) - {"jupyter_tiers", "__future__",
                                                                   "jupyter_core", "botocore"}
        assert third_party <= S3_EXTRA <= declared, (name, third_party, declared)
