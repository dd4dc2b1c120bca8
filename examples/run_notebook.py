"""Execute a notebook headless (nbclient) and print each cell's text output as it completes.

Widgets cannot render here, so the kernel is told to use jupyter-tiers' text view
(JUPYTER_TIERS_DISPLAY=text): streamed log lines, then the one-line job summary.
Usage: python examples/run_notebook.py NOTEBOOK [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def cell_text(cell: nbformat.NotebookNode) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") in ("execute_result", "display_data"):
            parts.append(out.get("data", {}).get("text/plain", "") + "\n")
        elif out.get("output_type") == "error":
            parts.append(f"{out.get('ename')}: {out.get('evalue')}\n")
    return "".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("notebook", type=Path)
    ap.add_argument("--timeout", type=int, default=600)
    args = ap.parse_args()
    os.environ["JUPYTER_TIERS_DISPLAY"] = "text"
    # The kernel must be this interpreter (it has jupyter-tiers installed).
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    nb = nbformat.read(args.notebook, as_version=4)

    def on_cell_executed(cell: nbformat.NotebookNode, cell_index: int, **_: object) -> None:
        text = cell_text(cell)
        if text:
            print(text, end="", flush=True)

    client = NotebookClient(nb, timeout=args.timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(args.notebook.parent)}},
                            on_cell_executed=on_cell_executed)
    client.execute()
    return 0


if __name__ == "__main__":
    sys.exit(main())
