"""Running the example notebooks headless (nbclient) and reading their outputs by cell tag.

The kernel is the venv's ``python3`` (jupyter_client runs a ``python`` kernelspec with the
interpreter running the tests; its PATH starts with the venv so the local tier's ranks find the
same ``python3``). The fixtures in conftest.py give it its own HOME, Jupyter data dir and
registry, and ``JUPYTER_TIERS_DISPLAY=text`` so ``--wait`` prints the streamed log and the
summary as plain text outputs.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
VENV_BIN = Path(sys.executable).parent
CELL_TIMEOUT = 600
EARLIER_TAIL = 40  # lines of each earlier cell's output shown when a cell fails
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

# A completed job's summary: its nodes, then what the log showed of its main metric (``— loss
# 0.0049``, when it printed one) and its newest checkpoint (when it left one).
SUMMARY_OK = re.compile(r"^job (\d+) COMPLETED in \d\d:\d\d:\d\d on (\S+)"
                        r"(?: — (?!checkpoint )(?P<metric>\S+) (?P<value>\S+))?"
                        r"(?: — checkpoint (?P<checkpoint>/\S+))?$")


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


def nodes_of(nodelist: str) -> list[str]:
    from jupyter_tiers.slurm.parse import expand_hostlist

    return expand_hostlist(nodelist)


def processes_mentioning(path: Path) -> list[int]:
    """Pids of processes whose working directory, command line or environment names ``path``."""
    found = []
    needle = str(path).encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(proc / "cwd")
            text = (proc / "cmdline").read_bytes() + b"\0" + (proc / "environ").read_bytes()
        except OSError:
            continue
        if cwd.startswith(str(path)) or needle in text:
            found.append(int(proc.name))
    return found


def run(name: str, env: dict[str, str], cwd: Path) -> nbformat.NotebookNode:
    """Run the notebook in ``cwd`` (no ./tiers.yaml there) and return it with its outputs. An
    error in any cell fails the test with the cell and its traceback."""
    nb = nbformat.read(EXAMPLES / name, as_version=4)
    client = NotebookClient(
        nb, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    )
    try:
        client.execute(env=env)
    except CellExecutionError as exc:
        # The failing cell alone rarely says why (a serve cell refusing a FAILED job): show the
        # tail of what each cell before it printed, e.g. the training job's log and summary.
        before = "\n".join(f"--- cell {tag!r} printed (last {EARLIER_TAIL} lines):\n"
                           + "\n".join(text.splitlines()[-EARLIER_TAIL:])
                           for tag, text in texts(nb).items() if text)
        raise AssertionError(f"{exc}\n\n{before}") from exc
    if env.get("JUPYTER_TIERS_DISPLAY") == "text":  # a static page shows text, not widgets
        save_outputs(nb, name)
    return nb


def save_outputs(nb: nbformat.NotebookNode, name: str) -> None:
    """Keep the executed notebook for the docs (docs/_ext/jt_docs.py renders it with these
    outputs): ``$JT_NOTEBOOK_OUTPUTS``, default test-output/notebooks/; the last run wins."""
    folder = Path(os.environ.get("JT_NOTEBOOK_OUTPUTS") or ROOT / "test-output" / "notebooks")
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}.{os.getpid()}.tmp"
    nbformat.write(nb, str(tmp))
    os.replace(tmp, folder / name)


def texts(nb: nbformat.NotebookNode) -> dict[str, str]:
    """Each code cell's text output (streams, text/plain, and ``ENAME: message`` for an error a
    ``raises-exception`` cell shows on purpose), by the cell's first tag."""
    out: dict[str, str] = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tag = cell.metadata["tags"][0]
        parts = []
        for output in cell.outputs:
            if output.output_type == "stream":
                parts.append(output.text)
            elif output.output_type in ("execute_result", "display_data"):
                parts.append(output.data.get("text/plain", "") + "\n")
            elif output.output_type == "error":
                parts.append(f"{output.ename}: {output.evalue}\n")
        out[tag] = "".join(parts)
    return out


def execute(name: str, env: dict[str, str], cwd: Path) -> dict[str, str]:
    return texts(run(name, env, cwd))


def last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert lines, "the cell printed nothing"
    return lines[-1]


