"""Pure: links the widgets' ES modules (``import { a } from "./x.js"``) into one self-contained ES
module, as anywidget's ``_esm`` needs (a module loaded from a string cannot resolve ``./x.js``).

Each module becomes one function scope, evaluated once, in the order ES modules are (imports
first, depth first, in the order they are written), that returns its exports; an import becomes
a ``const`` taken from the imported module's scope. So top-level names stay private to their
module, as they are when the lab panel's webpack bundles the same files.

Only the subset the widgets use is read, each statement at the start of a line:
``import { a, b as c } from "./x.js";`` (a file beside the importer, or ``./vendor/x.js``),
``export function f``, ``export async function f``, ``export class C``, ``export const x =`` and
``export default EXPR``.
Anything else that looks like an import or an export, an import cycle, a missing file or export,
or the reserved prefix ``__jt_`` raises :class:`LinkError` naming the file and what is allowed:
nothing is guessed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

#: The names the linker gives the module scopes; a module may not use the prefix itself.
RESERVED = "__jt_"

_NAME = r"[A-Za-z_$][\w$]*"
# A file beside the importer, or one in vendor/ (a library copied in: labextension/scripts/).
_FILE = re.compile(r"(?:vendor/)?[A-Za-z0-9_][A-Za-z0-9_.-]*\.js")
_IMPORT = re.compile(
    r"""import\s*\{(?P<names>[^{}]*)\}\s*from\s*(?P<q>["'])\./(?P<file>[^"'\n]*)(?P=q)[ \t]*;?[ \t]*""")
_IMPORT_NAME = re.compile(rf"\s*(?P<name>{_NAME})(?:\s+as\s+(?P<local>{_NAME}))?\s*")
_EXPORT_DECL = re.compile(
    rf"export\s+(?P<kw>(?:async\s+)?function\b\s*\*?|class\b|const\b)\s*(?P<name>{_NAME})")
_EXPORT_DEFAULT = re.compile(r"export\s+default\b\s*")
# A line that would be an import or export statement (or one hidden in text): only the forms above.
_LOOKS_LIKE = re.compile(r"^\s*(?:import|export)(?:\s|[{*'\"]|$)|\bimport\s*(?:\(|\.\s*meta\b)")
_IMPORT_LINES = 40  # the most lines one import statement may span

ALLOWED = ('import { a, b as c } from "./x.js"; export function f / async function f / class C / '
           "const x = ...; export default EXPR")


class LinkError(ValueError):
    """A module the linker cannot read, or a module graph it cannot link."""


@dataclass(frozen=True)
class Module:
    """One parsed module: its imports ``(file, ((name, local), ...))`` in order, the names it
    exports (``default`` included), and its text with the statements rewritten (the imports
    blanked, ``export`` dropped, ``export default`` made ``const __jt_default =``)."""

    file: str
    imports: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
    exports: tuple[str, ...]
    body: str


def parse(file: str, text: str) -> Module:
    """Parses one module's text (``file`` names it in errors)."""
    if RESERVED in text:
        raise LinkError(f"{file}: the prefix {RESERVED} is the linker's own; rename what uses it")
    lines = text.split("\n")
    out: list[str] = []
    imports: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    exports: list[str] = []
    locals_: set[str] = set()
    i = 0
    while i < len(lines):
        line = lines[i]
        where = f"{file}:{i + 1}"
        if re.match(r"import(?:\s|\{|$)", line):
            end = _import_end(lines, i)
            match = _IMPORT.fullmatch("\n".join(lines[i:end + 1])) if end is not None else None
            if end is None or not match:
                raise LinkError(f"{where}: an import the linker does not read; allowed: {ALLOWED}")
            target = match["file"]
            if not _FILE.fullmatch(target):
                raise LinkError(f"{where}: imports {target!r}; "
                                f"allowed: a .js file beside {file} or in vendor/")
            pairs = _import_names(where, match["names"])
            for _, local in pairs:
                if local in locals_:
                    raise LinkError(f"{where}: {local} is imported twice")
                locals_.add(local)
            imports.append((target, pairs))
            out.extend([""] * (end + 1 - i))
            i = end + 1
            continue
        decl = _EXPORT_DECL.match(line)
        default = _EXPORT_DEFAULT.match(line)
        if decl:
            name = decl["name"]
            if name in exports:
                raise LinkError(f"{where}: {name} is exported twice")
            exports.append(name)
            out.append(line[len("export"):].lstrip())
        elif default and not re.match(r"(?:async\s+)?function\b|class\b", line[default.end():]):
            if "default" in exports:
                raise LinkError(f"{where}: a second export default")
            exports.append("default")
            out.append(f"const {RESERVED}default = " + line[default.end():])
        elif _LOOKS_LIKE.search(line):
            raise LinkError(f"{where}: {line.strip()[:60]!r} is not a statement the linker reads; "
                            f"allowed, each at the start of a line: {ALLOWED}")
        else:
            out.append(line)
        i += 1
    clash = locals_ & {e for e in exports if e != "default"}
    if clash:
        raise LinkError(f"{file}: {', '.join(sorted(clash))} both imported and exported")
    return Module(file, tuple(imports), tuple(exports), "\n".join(out))


def _import_end(lines: list[str], start: int) -> int | None:
    """The index of the line that ends the import statement starting at ``start``."""
    for k in range(start, min(len(lines), start + _IMPORT_LINES)):
        if re.search(r"\bfrom\s*[\"']", lines[k]):
            return k
    return None


def _import_names(where: str, names: str) -> tuple[tuple[str, str], ...]:
    parts = names.split(",")
    if parts and not parts[-1].strip():
        parts.pop()  # a trailing comma
    pairs = []
    for part in parts:
        match = _IMPORT_NAME.fullmatch(part)
        if not match or match["name"] == "default":
            raise LinkError(f"{where}: cannot read the imported name {part.strip()!r}; "
                            "allowed: NAME or NAME as LOCAL")
        pairs.append((match["name"], match["local"] or match["name"]))
    if not pairs:
        raise LinkError(f"{where}: an import of no names")
    return tuple(pairs)


def link(entry: str, read: Callable[[str], str]) -> str:
    """One ES module whose default export is ``entry``'s, with every module it imports (through
    ``read(file)``, which raises OSError for a missing file) linked in."""
    order: list[Module] = []
    done: dict[str, Module] = {}
    path: list[str] = []

    def visit(file: str) -> Module:
        if file in done:
            return done[file]
        if file in path:
            raise LinkError("an import cycle: " + " -> ".join([*path[path.index(file):], file]))
        if not _FILE.fullmatch(file):
            raise LinkError(f"{file!r} is not a .js file name")
        try:
            text = read(file)
        except OSError as exc:
            importer = f" (imported by {path[-1]})" if path else ""
            raise LinkError(f"cannot read {file}{importer}: {exc.strerror or exc}") from None
        module = parse(file, text)
        if file.startswith("vendor/") and module.imports:
            # its "./x.js" would be vendor/x.js to a browser, x.js here: a copied library stands alone
            raise LinkError(f"{file}: a module in vendor/ imports nothing; it imports {module.imports[0][0]}")
        path.append(file)
        for target, pairs in module.imports:
            dep = visit(target)
            for name, _ in pairs:
                if name not in dep.exports:
                    raise LinkError(f"{file} imports {name} from {target}, which does not export it")
        path.pop()
        done[file] = module
        order.append(module)
        return module

    if "default" not in visit(entry).exports:
        raise LinkError(f"{entry} has no export default (the view anywidget loads)")
    scope = {m.file: f"{RESERVED}{k}" for k, m in enumerate(order)}
    parts = [f"// {entry} and the modules it imports, linked into one ES module by "
             f"jupyter_tiers/faces/widgets/esm_link.py: edit {', '.join(m.file for m in order)}."]
    for module in order:
        head = [f"const {{ {', '.join(n if n == loc else f'{n}: {loc}' for n, loc in pairs)} }} = {scope[t]};"
                for t, pairs in module.imports]
        names = [f"default: {RESERVED}default" if e == "default" else e for e in module.exports]
        parts.append(f"// --- {module.file}\nconst {scope[module.file]} = (() => {{\n" + "\n".join(head)
                     + f"\n{module.body}\nreturn {{ {', '.join(names)} }};\n}})();")
    parts.append(f"export default {scope[entry]}.default;\n")
    return "\n".join(parts)
