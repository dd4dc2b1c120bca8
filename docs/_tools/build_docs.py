"""Build the docs as CI does: Sphinx with warnings as errors, then every internal link checked.

    python docs/_tools/build_docs.py [OUTDIR]      (default docs/_build/html)

Offline: nothing is fetched and no notebook is executed. Exit status 1 on any warning or broken
link, with each printed. ``tests/run.sh`` runs it as its "docs" phase after the test lanes, so the
example notebooks are rendered with the outputs that run saved (``test-output/notebooks/``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def build(outdir: Path) -> list[str]:
    """Build into ``outdir``; returns the problems (Sphinx's warnings, then broken links)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(outdir.parent / (outdir.name + ".doctrees")), str(DOCS), str(outdir)],
        capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    problems = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    if done.returncode != 0 and not problems:
        problems.append(f"sphinx exited with status {done.returncode}")
    if done.returncode == 0:
        sys.path.insert(0, str(DOCS / "_ext"))
        from jt_docs import broken_links

        problems += [f"broken internal link: {link}" for link in broken_links(outdir)]
    return problems


def main(argv: list[str]) -> int:
    outdir = Path(argv[0]).resolve() if argv else DOCS / "_build" / "html"
    started = time.monotonic()
    problems = build(outdir)
    for line in problems:
        print(line, file=sys.stderr)
    pages = len(list(outdir.rglob("*.html"))) if outdir.exists() else 0
    verdict = f"{len(problems)} problem(s)" if problems else "no warnings, every internal link found"
    print(f"[docs] {pages} pages in {outdir} in {time.monotonic() - started:.0f} s: {verdict}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
