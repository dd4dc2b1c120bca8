"""Sphinx configuration of the jupyter-tiers documentation (Sphinx + MyST + myst-nb).

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (``pip install -e
.[docs]``). Offline by design: no intersphinx, nothing fetched, notebooks not executed (their
stored outputs are rendered). The reference tables come from the code (``_ext/jt_reference.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))  # autodoc imports this checkout's jupyter_tiers

import jupyter_tiers  # noqa: E402

project = "jupyter-tiers"
author = "the jupyter-tiers authors"
copyright = "the jupyter-tiers authors, BSD-3-Clause"
version = release = jupyter_tiers.__version__

extensions = [
    "myst_nb",  # MyST Markdown pages and notebooks (brings myst_parser)
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "jt_docs",
]

# README.md's sections are included into the pages (docs/_tools/front_door.py inlines them when
# README becomes the front door); the front door's draft and the helpers are not pages.
exclude_patterns = ["_build", "_ext", "_tools", "_front_door_README.md", "**/.ipynb_checkpoints",
                    "examples/notebooks/*.tmp*"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
# Options such as --compute stay two dashes (no en dash), quotes stay straight.
smartquotes = False

myst_enable_extensions = ["colon_fence", "deflist", "fieldlist"]
myst_heading_anchors = 3
# README's sections keep their own heading levels where a page includes them.
suppress_warnings = ["myst.header"]

# Notebooks: render what is stored (a test run's outputs when present), never execute.
nb_execution_mode = "off"
nb_merge_streams = True

autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autoclass_content = "both"

html_theme = "pydata_sphinx_theme"
html_title = "jupyter-tiers"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 5,
    "footer_start": ["copyright"],
    # the wide generated tables get the room of the page's table of contents
    "secondary_sidebar_items": {"**": ["page-toc", "sourcelink"], "reference/magics": [],
                                "reference/profiles": [], "reference/rest-api": [],
                                "troubleshooting": []},
    "footer_end": [],
}
html_static_path = ["_static"]
html_css_files = ["jt.css"]
html_last_updated_fmt = None
