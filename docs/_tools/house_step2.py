"""The house, step 2 (issue 27): move the flat package into folders that name their roles.

One scripted move, so that it can be run again on a tree with more work merged into it (and read
as a table rather than as a diff of 300 files). Run from the repository root on a clean tree::

    python docs/_tools/house_step2.py          # moves with `git mv`, rewrites every reference
    python docs/_tools/house_step2.py --check  # says what it would move; changes nothing

What it does, in order:

1. Every module of ``jupyter_tiers`` gets its new dotted name from :data:`MOVES` (a module or a
   whole package; the longest matching prefix wins). A top-level module that no entry places is
   an error: a new module must be given a room, not left in the hall.
2. Every ``from .x import y`` / ``from jupyter_tiers.x import y`` in the package, the tests, the
   benches and the docs' tools is read with :mod:`ast` against the OLD layout and written again
   for the NEW one (relative inside the package, absolute outside it). ``from pkg import module``
   becomes ``from newpkg import newleaf as module`` where the leaf was renamed.
3. Every other mention of an old dotted name (``"jupyter_tiers.watch.time"`` in a monkeypatch,
   ``jupyter_tiers.cli:main`` in pyproject, ``automodule::`` in the docs) and of an old path
   (``jupyter_tiers/sandbox/cluster.sh``, ``'../../jupyter_tiers/widgets/job_view.js'``) is
   rewritten in every text file the repository tracks.
4. ``git mv`` moves the files; each new folder gets an ``__init__.py`` saying what lives there.

The import contracts, the architecture page and the layout test are edited by hand after it (they
are the design, not a mechanical consequence of it).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = "jupyter_tiers"

#: old dotted name (below jupyter_tiers) -> new dotted name. A package moves with everything in it.
MOVES: dict[str, str] = {
    # core/: plain values, the shared exceptions, cluster text as text
    "model": "core.model", "errors": "core.errors", "timefmt": "core.timefmt",
    "plaintext": "core.plaintext", "detail": "core.detail", "record": "core.record",
    "profile": "core.profile", "reachability": "core.reachability",
    # batch/: the pure training-job protocol
    "arrays": "batch.arrays", "status": "batch.status", "jobdir": "batch.jobdir",
    "history": "batch.history", "logs": "batch.logs", "metrics": "batch.metrics",
    "signals": "batch.signals", "requeue": "batch.requeue", "failstop": "batch.failstop",
    "jobenv": "batch.jobenv",
    # serving/: a service's status, HTTP, OpenAI compatibility, load tests
    "servestatus": "serving.status", "httpmodel": "serving.httpmodel",
    "openai_compat": "serving.openai_compat", "loadplan": "serving.loadplan",
    "loadgen": "serving.loadgen",
    # data/: files and objects that travel: sync, files back, the object store, the handoff
    "sync": "data.sync", "files": "data.files", "objectstore": "data.objectstore",
    "s3_upload": "data.s3_upload", "handoff": "data.handoff",
    "checkpoint_upload": "data.checkpoint_upload", "model_cache": "data.model_cache",
    # spec/: every option, declared once; the validated specs; the routing guard
    "options": "spec.options", "jobspec": "spec.jobspec", "servespec": "spec.servespec",
    "guard": "spec.guard",
    # config/: profiles, what a project file may set, the registry of jobs and services
    "config": "config.profiles", "config_cache": "config.cache", "registry": "config.registry",
    "project_trust": "config.project_trust",
    # engine/: the tier contract, the handles, the one watch protocol, the batch watcher
    "tier": "engine.tier", "handles": "engine.handles", "array_job": "engine.array_job",
    "watch": "engine.watch", "subscription": "engine.subscription",
    "serve_http": "engine.serve_http",
    # app/: what %tiers, the CLI and REST do (the "actions" layer), and the views' plain state
    "service": "app.actions", "task_handoff": "app.task_handoff", "viewstate": "app.viewstate",
    # faces/: what users touch
    "magics": "faces.magics", "cli": "faces.cli", "tiers_command": "faces.tiers_command",
    "display": "faces.display", "server": "faces.server", "widgets": "faces.widgets",
    # tools/: setting up (init) and the cluster in a box
    "profile_init": "tools.profile_init", "sandbox": "tools.sandbox",
}

#: What each new folder holds (its __init__.py docstring).
FOLDERS: dict[str, str] = {
    "core": "Plain values, the shared exceptions and cluster text as text: what every layer names.",
    "batch": "The training job's protocol, pure: arrays, job directories, logs, metrics, status, "
             "requeues, signals, fail-stop, history, the enclosing job's environment.",
    "serving": "A service's status, HTTP to it as plain data, the OpenAI-compatible API, and its "
               "load tests (the plan, pure; the generator).",
    "data": "What travels between the notebook, the cluster and the object store: --sync's files, "
            "files back, object-store URIs, checkpoint uploads, the train-to-serve handoff, the "
            "local tier's model cache.",
    "spec": "Every magic option, declared once; the validated job and service specs; the routing "
            "guard.",
    "config": "Profiles (tiers.yaml), what a project file may set, and the registry of every job "
              "and service.",
    "engine": "The tier contract, the Job and Service handles, the one watch protocol, the batch "
              "watcher and HTTP to a service through its forward.",
    "app": "What %tiers, `jupyter tiers` and the REST API do, as plain calls (actions), and the "
           "views' plain-data state.",
    "faces": "What users touch: the cell magics, the `jupyter tiers` command, %tiers, the widgets "
             "and the jupyter-server extension behind the sidebar.",
    "tools": "Setting up: `jupyter tiers init` and the cluster in a box (sandbox).",
}

#: Files outside the package whose Python imports are rewritten (step 2).
PY_TREES = ("jupyter_tiers", "tests", "bench", "docs/_ext", "docs/_tools", "examples")
#: Text files rewritten for dotted names and paths (step 3), by suffix.
TEXT_SUFFIXES = {".py", ".md", ".toml", ".json", ".ts", ".tsx", ".js", ".mjs", ".sh", ".yaml",
                 ".yml", ".cfg", ".ipynb", ".txt", ".css", ".rst", ".ini", ""}
SKIP_PARTS = {"node_modules", ".git", ".venv", "lib", "_build", "__pycache__", "test-output"}


def old_modules() -> dict[str, Path]:
    """Every module of the package: dotted name -> file (a package is its __init__.py)."""
    found = {}
    for path in sorted((ROOT / PKG).rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        if "labextension" in rel.parts or "__pycache__" in rel.parts:
            continue
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def new_name(old: str) -> str:
    """The new dotted name of an old one (``jupyter_tiers.x.y``); unchanged when not moved."""
    if old == PKG or not old.startswith(PKG + "."):
        return old
    rest = old[len(PKG) + 1:]
    parts = rest.split(".")
    for cut in range(len(parts), 0, -1):
        head = ".".join(parts[:cut])
        if head in MOVES:
            return ".".join([PKG, MOVES[head], *parts[cut:]])
    return old


def check_every_module_placed(modules: dict[str, Path]) -> None:
    top_level_ok = {PKG, f"{PKG}.api", f"{PKG}.doctor", f"{PKG}.slurm", f"{PKG}.k8s",
                    f"{PKG}.local", f"{PKG}.transport", *(f"{PKG}.{f}" for f in FOLDERS)}
    loose = []
    for name in modules:
        first = ".".join(name.split(".")[:2])
        if first not in top_level_ok and new_name(name) == name:
            loose.append(name)
    if loose:
        sys.exit(f"no room for: {', '.join(sorted(loose))} (add each to MOVES)")


# --- step 2: Python imports -----------------------------------------------------------------
def _module_of(path: Path) -> tuple[str, bool]:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    is_pkg = parts[-1] == "__init__"
    if is_pkg:
        parts = parts[:-1]
    return ".".join(parts), is_pkg


def _package_of(module: str, is_pkg: bool) -> list[str]:
    parts = module.split(".")
    return parts if is_pkg else parts[:-1]


def _resolve(module: str, is_pkg: bool, level: int, target: str | None) -> str:
    base = _package_of(module, is_pkg)
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([target] if target else [])])


def _relative(from_module: str, is_pkg: bool, target: str) -> str:
    """``target`` written relative to ``from_module`` (its new name)."""
    pkg = _package_of(from_module, is_pkg)
    parts = target.split(".")
    common = 0
    while common < min(len(pkg), len(parts)) and pkg[common] == parts[common]:
        common += 1
    level = len(pkg) - common + 1
    return "." * level + ".".join(parts[common:])


def _render(source: str, names: list[tuple[str, str | None]], indent: str) -> str:
    items = [n if a is None else f"{n} as {a}" for n, a in names]
    line = f"from {source} import {', '.join(items)}"
    if len(indent) + len(line) <= 110:
        return line
    body = "".join(f"{indent}    {item},\n" for item in items)
    return f"from {source} import (\n{body}{indent})"


def import_edits(path: Path, text: str, modules: set[str]) -> list[tuple[int, int, str]]:
    """The file's package imports written for the new layout: (start, end, new text) spans."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    in_pkg = path.relative_to(ROOT).parts[0] == PKG
    old_mod, is_pkg = _module_of(path) if in_pkg else ("", False)
    new_mod = new_name(old_mod) if in_pkg else ""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for ln in lines:
        offsets.append(offsets[-1] + len(ln))
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level == 0 and not (node.module == PKG or (node.module or "").startswith(PKG + ".")):
            continue
        if node.level and not in_pkg:
            continue
        base = node.module if node.level == 0 else _resolve(old_mod, is_pkg, node.level, node.module)
        assert base is not None
        groups: list[tuple[str, list[tuple[str, str | None]]]] = []
        for alias in node.names:
            full = f"{base}.{alias.name}"
            if alias.name != "*" and full in modules:  # a submodule: from pkg import module
                target = new_name(full)
                source, leaf = target.rsplit(".", 1)
                asname = alias.asname or (alias.name if leaf != alias.name else None)
                entry = (leaf, asname if asname != leaf else None)
            else:
                source, entry = new_name(base), (alias.name, alias.asname)
            if groups and groups[-1][0] == source:
                groups[-1][1].append(entry)
            else:
                groups.append((source, [entry]))
        written = []
        for source, names in groups:
            spelled = _relative(new_mod, is_pkg, source) if node.level else source
            written.append((spelled, names))
        original = [(node.module if node.level == 0 else "." * node.level + (node.module or ""),
                     [(a.name, a.asname) for a in node.names])]
        if written == original:
            continue
        start = offsets[node.lineno - 1] + node.col_offset
        assert node.end_lineno is not None and node.end_col_offset is not None
        end = offsets[node.end_lineno - 1] + node.end_col_offset
        indent = " " * node.col_offset
        edits.append((start, end, f"\n{indent}".join(_render(s, n, indent) for s, n in written)))
    return sorted(edits)


def transform(text: str, edits: list[tuple[int, int, str]], pattern: re.Pattern[str],
              table: dict[str, str]) -> str:
    """``text`` with the import ``edits`` made and, everywhere else, old names and paths renamed
    (never inside an edit: its names are already new, and ``jupyter_tiers.config`` is both an
    old module and the new package that holds it)."""
    out, pos = [], 0
    for start, end, new in [*edits, (len(text), len(text), "")]:
        out.append(pattern.sub(lambda m: table[m.group(m.lastindex or 0)], text[pos:start]))
        out.append(new)
        pos = end
    return "".join(out)


# --- step 3: dotted names and paths in every text file ---------------------------------------
def name_and_path_pattern(modules: set[str]) -> tuple[re.Pattern[str], dict[str, str]]:
    table: dict[str, str] = {}
    for old in modules:
        new = new_name(old)
        if new == old:
            continue
        table[old] = new
        old_path, new_path = old.replace(".", "/"), new.replace(".", "/")
        if old in MOVES.values() or (ROOT / old_path).is_dir():
            table[old_path + "/"] = new_path + "/"
        table[old_path + ".py"] = new_path + ".py"
    # Non-Python files that move with a package (cluster.sh, the widgets' .js and .css).
    for old in MOVES:
        folder = ROOT / PKG / old.replace(".", "/")
        if folder.is_dir():
            table[f"{PKG}/{old.replace('.', '/')}/"] = f"{PKG}/{MOVES[old].replace('.', '/')}/"
            table[f"{PKG}/{old.replace('.', '/')}"] = f"{PKG}/{MOVES[old].replace('.', '/')}"
    slash = sorted((k for k in table if k.endswith("/")), key=len, reverse=True)
    word = sorted((k for k in table if not k.endswith("/")), key=len, reverse=True)
    pattern = re.compile(r"(?<![\w])(?:(" + "|".join(map(re.escape, slash)) + r")|("
                         + "|".join(map(re.escape, word)) + r")(?![\w]))")
    return pattern, table


def tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    files = []
    for name in out.stdout.splitlines():
        path = ROOT / name
        if SKIP_PARTS & set(Path(name).parts[:-1]) or not path.is_file():
            continue
        if path.suffix in TEXT_SUFFIXES and path.name != "house_step2.py":
            files.append(path)
    return files


def main(argv: list[str]) -> int:
    check = "--check" in argv
    modules = old_modules()
    check_every_module_placed(modules)
    moved_files: dict[Path, Path] = {}
    for name, module_path in modules.items():
        new_dotted = new_name(name)
        if (new_dotted != name and module_path.name == "__init__.py"
                and name.split(".")[-1] in MOVES):
            continue  # a moved package: moved whole below
        if new_dotted != name:
            moved_files[module_path] = ROOT / (new_dotted.replace(".", "/") + ".py")
    if check:
        for src_file, dst_file in sorted(moved_files.items()):
            print(f"{src_file.relative_to(ROOT)} -> {dst_file.relative_to(ROOT)}")
        return 0
    names = set(modules)
    # Steps 2 and 3 read every file at its old place, before anything moves.
    pattern, table = name_and_path_pattern(names)
    python_files = {path for tree in PY_TREES for path in (ROOT / tree).rglob("*.py")}
    for path in tracked_text_files():
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        edits = import_edits(path, text, names) if path in python_files else []
        new_text = transform(text, edits, pattern, table)
        if new_text != text:
            path.write_text(new_text, encoding="utf-8", errors="surrogateescape")
    # Step 4: the move.
    for folder in FOLDERS:
        (ROOT / PKG / folder).mkdir(exist_ok=True)
    for old in sorted(MOVES, key=lambda m: m.count(".")):
        src = ROOT / PKG / old.replace(".", "/")
        dst = ROOT / PKG / MOVES[old].replace(".", "/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.with_suffix(".py").is_file():  # first: config.py moves into the new config/
            subprocess.run(["git", "mv", str(src.with_suffix(".py")), str(dst.with_suffix(".py"))],
                           cwd=ROOT, check=True)
        elif (src / "__init__.py").is_file():
            subprocess.run(["git", "mv", str(src), str(dst)], cwd=ROOT, check=True)
    for folder, doc in FOLDERS.items():
        init = ROOT / PKG / folder / "__init__.py"
        if not init.exists():
            wrapped = textwrap.fill(doc, width=100, initial_indent='"""',
                                    subsequent_indent="") + '"""'
            init.write_text(wrapped + "\n", encoding="utf-8")
            subprocess.run(["git", "add", str(init)], cwd=ROOT, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
