"""Pure: a traceback's frames in the user's cell, as the cell's lines.

The cell body runs as ``main.py`` in the job directory, so a traceback names a file on the cluster
(``File "/scratch/alice/.jupyter-tiers/train-20261207-101500-a1b2c3/main.py", line 7``) and the
file's line, which is line 8 of the cell the user sees (the magic line is line 1). :func:`in_cell`
rewrites those frames as ``File "cell", line 8``. Only the job's own ``main.py`` is matched (its
job directory's name is in the path: a library's ``main.py`` stays as it is); the pattern is
anchored on a literal and its one repeat stops at a quote, so the work is linear in the text.
"""

from __future__ import annotations

import re

__all__ = ["CELL_FILE", "MAGIC_LINES", "in_cell"]

#: What a rewritten frame names instead of the path.
CELL_FILE = "cell"
#: Lines of the cell above the body: the magic line.
MAGIC_LINES = 1
_BODY = "main.py"


def _pattern(jobdir: str) -> re.Pattern[str] | None:
    name = jobdir.rstrip("/").rsplit("/", 1)[-1]
    if not name:
        return None
    return re.compile(r'File "[^"\n]{0,4096}/' + re.escape(name) + "/" + re.escape(_BODY)
                      + r'", line (\d{1,9})')


def in_cell(text: str, jobdir: str) -> str:
    """``text`` with the frames of the job's ``main.py`` (in ``jobdir``, matched by its name)
    shown as the cell's lines: ``File "cell", line N + 1``. Other text is unchanged."""
    if _BODY not in text or not jobdir:
        return text
    pattern = _pattern(jobdir)
    if pattern is None:
        return text
    return pattern.sub(lambda m: f'File "{CELL_FILE}", line {int(m.group(1)) + MAGIC_LINES}', text)
