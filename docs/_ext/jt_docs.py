"""Sphinx glue for the jupyter-tiers docs.

- ``{jt-reference} NAME``: a reference table generated from the code at build time
  (:mod:`jt_reference`), parsed as MyST Markdown into the page;
- the example notebooks: copied into ``docs/examples/notebooks/`` before reading, each from
  ``test-output/notebooks/`` when a test run left it there executed (with its outputs), else the
  stripped one from ``examples/`` (myst-nb renders them; nothing is executed by the docs build);
- an internal link check after the build: every ``href``/``src`` of the HTML output that points
  into the site must name an existing file and, with ``#anchor``, an existing id there.
"""

from __future__ import annotations

import html.parser
import os
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import jt_reference
from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ("quickstart", "train_then_serve", "ddp_slurm", "teaching_lab", "serve_k8s", "serving")


class ReferenceDirective(SphinxDirective):
    """``{jt-reference} NAME``: the generated table NAME (see jt_reference.GENERATORS)."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        name = self.arguments[0]
        try:
            text = jt_reference.generate(name)
        except Exception as exc:  # a key without a description, an unknown table: the build fails
            raise self.error(f"jt-reference {name}: {exc}") from None
        for path in ("jupyter_tiers/spec/options.py", "jupyter_tiers/config/profiles.py",
                     "jupyter_tiers/faces/magics.py",
                     "jupyter_tiers/faces/tiers_command.py", "jupyter_tiers/faces/server/handlers.py"):
            self.env.note_dependency(str(ROOT / path))
        container = nodes.container(classes=["jt-reference"])
        self.state.nested_parse(StringList(text.splitlines(), source=f"<jt-reference {name}>"),
                                self.content_offset, container)
        return [container]


def copy_notebooks(app: Sphinx) -> None:
    """The example notebooks into the docs' source tree (executed copies when a test run saved
    them: ``$JT_NOTEBOOK_OUTPUTS``, default ``test-output/notebooks``)."""
    executed = Path(os.environ.get("JT_NOTEBOOK_OUTPUTS") or ROOT / "test-output" / "notebooks")
    target = Path(app.srcdir) / "examples" / "notebooks"
    target.mkdir(parents=True, exist_ok=True)
    for name in NOTEBOOKS:
        source = executed / f"{name}.ipynb"
        if not source.is_file():
            source = ROOT / "examples" / f"{name}.ipynb"
        dest = target / f"{name}.ipynb"
        if dest.is_file() and dest.read_bytes() == source.read_bytes():
            continue  # unchanged: Sphinx need not read it again
        tmp = dest.with_suffix(f".tmp{os.getpid()}")
        shutil.copyfile(source, tmp)
        os.replace(tmp, dest)


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if value is None:
                continue
            if key == "id" or (key == "name" and tag == "a"):
                self.ids.add(value)
            elif (key == "href" and tag in ("a", "link")) or (key == "src" and tag in ("img", "script")):
                self.links.append(value)


def broken_links(outdir: Path) -> list[str]:
    """Internal links of the HTML site under ``outdir`` that lead nowhere: ``page: link``."""
    parsed: dict[Path, _Links] = {}

    def read(path: Path) -> _Links:
        if path not in parsed:
            links = _Links()
            links.feed(path.read_text(encoding="utf-8", errors="replace"))
            parsed[path] = links
        return parsed[path]

    broken = []
    # _static/ holds the theme's own templates (Jinja source, not pages); _sources/ plain text.
    pages = sorted(p for p in outdir.rglob("*.html")
                   if p.relative_to(outdir).parts[0] not in ("_static", "_sources"))
    for page in pages:
        for link in read(page).links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "data:", "javascript:")):
                continue  # external: not checked here (the build must work offline)
            target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(outdir)}: {link}")
            elif parts.fragment and target.suffix == ".html" and \
                    unquote(parts.fragment) not in read(target).ids:
                broken.append(f"{page.relative_to(outdir)}: {link} (no such anchor)")
    return broken


def check_links(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    for problem in broken_links(Path(app.outdir)):
        logger.warning("broken internal link: %s", problem, type="jt", subtype="link")


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("jt-reference", ReferenceDirective)
    app.connect("builder-inited", copy_notebooks)
    app.connect("build-finished", check_links)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
