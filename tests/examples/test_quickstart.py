"""examples/quickstart.ipynb, the README's main command: train on two local ranks, serve the
checkpoint on the local tier with ``%%k8s_serve --model-from``, ask it, delete it. No cluster.

Also the template test: the same notebook run by papermill's own command line with ``-p``
overrides that change the profile and the shape of the job and of the service.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from jupyter_tiers.config.registry import Registry

from .nbrun import (
    EXAMPLES,
    WIDGET_MIME,
    execute,
    last_line,
    processes_mentioning,
    run,
    texts,
    torch_available,
)

TRAIN_SUMMARY = re.compile(
    r"^job (\d+) COMPLETED in \d\d:\d\d:\d\d on (\S+)(?: — loss (?P<loss>[\d.]+))?"
    r" — checkpoint (/\S+/checkpoints/step-00010\.json)"
    r"(?: — CPU \d+ % of \d+ cores? over [^;]+; memory peak [\d.]+ (?:of [\d.]+ )?GB per node)?$"
)
SERVE_SUMMARY = re.compile(r"^service (\S+) READY (\d+)/(\d+)(?: in \d\d:\d\d:\d\d)?"
                           r" — (http://127\.0\.0\.1:\d+) \(revision 1\) — model from (\S+/\d+) \((\S+)\)$")


@dataclass
class Shape:
    """What the notebook was asked for (its parameters)."""

    profile: str = "local"
    serve_profile: str = "local"
    nodes: int = 2
    name: str = "quickstart"
    service: str = "predictor"
    replicas: int = 1


def check_quickstart(out: dict[str, str], backend: str, shape: Shape) -> None:
    """Every cell's output, as a reader of the headless run sees it."""
    n, r = shape.nodes, shape.replicas
    train = out["train"]
    header = re.fullmatch(rf"job (\d+) \({shape.name}\) submitted to {shape.profile}: {n} ranks",
                          train.splitlines()[0])
    assert header, train
    job_id = header.group(1)

    losses = re.findall(r"^0: step +(\d+) loss ([\d.]+)$", train, re.M)
    assert [int(s) for s, _ in losses] == list(range(1, 11)), train
    values = [float(v) for _, v in losses]
    assert all(b <= a for a, b in itertools.pairwise(values)), values
    assert values[-1] < values[0] / 10, values

    finals = re.findall(rf"^(\d+): rank \1 of {n}: w=(\S+) b=(\S+) \((.+)\)$", train, re.M)
    assert sorted(int(rank) for rank, *_ in finals) == list(range(n)), train
    assert {(w, b, how) for _, w, b, how in finals} == {(finals[0][1], finals[0][2], backend)}, (
        "the ranks disagree: the all-reduce did not average their gradients"
    )
    w, b = float(finals[0][1]), float(finals[0][2])
    assert abs(w - 3) < 0.15 and abs(b - 1) < 0.05, (w, b)

    # The summary line names the newest checkpoint, which holds the weights the ranks printed.
    summary = TRAIN_SUMMARY.match(last_line(train))
    assert summary, train
    assert summary.group(1) == job_id and summary.group(2) == f"local[0-{n - 1}]", train
    assert summary["loss"] in (None, losses[-1][1]), train  # the log's last loss, if shown
    ckpt_path = Path(summary.group(4))
    assert ckpt_path.parent.parent.name == job_id and ckpt_path.parent.parent.parent.name == shape.name
    assert sorted(p.name for p in ckpt_path.parent.iterdir()) == ["step-00005.json", "step-00010.json"]
    ckpt = json.loads(ckpt_path.read_text())
    assert ckpt["step"] == 10 and (f"{ckpt['w']:.4f}", f"{ckpt['b']:.4f}") == (finals[0][1], finals[0][2])

    # The service: applied, every replica serving that checkpoint, then one summary with one URL.
    serve = out["serve"]
    s = "s" if r != 1 else ""
    model_from = f"model from {shape.profile}/{job_id} ({shape.name})"
    applied = f"service {shape.service} applied to {shape.serve_profile}: {r} replica{s}, {model_from}"
    assert serve.splitlines()[0] == applied, serve
    started = re.findall(
        rf"^({shape.service}-\S+): serving y = {re.escape(finals[0][1])}x \+ {re.escape(finals[0][2])}"
        r" \(step-00010\.json, step 10\) on port (\d+)$", serve, re.M)
    assert len({pod for pod, _ in started}) == r and len({port for _, port in started}) == r, serve
    ready = SERVE_SUMMARY.match(last_line(serve))
    assert ready and ready.groups()[:3] == (shape.service, str(r), str(r)), serve
    assert ready.groups()[4:] == (f"{shape.profile}/{job_id}", shape.name), serve
    url = ready.group(4)
    assert url.rsplit(":", 1)[1] not in {port for _, port in started}  # one front port for all

    assert out["query"] == (f"y(2) = {2 * ckpt['w'] + ckpt['b']:.4f} from step-00010.json (step 10); "
                            "the true line gives 7\n"), out["query"]

    rows = [ln.split() for ln in out["jobs"].splitlines()]
    assert rows[0][:8] == ["ID", "KIND", "NAME", "PROFILE", "TIER", "STATE", "SIZE", "WHERE"]
    served = [shape.service, "service", shape.service, shape.serve_profile, "local", "READY", f"{r}/{r}", url]
    trained = [job_id, "job", shape.name, shape.profile, "local", "COMPLETED", str(n), f"local[0-{n - 1}]"]
    assert served in [row[:8] for row in rows] and trained in [row[:8] for row in rows], out["jobs"]

    assert out["delete"] == f"service {shape.service} deleted\n"


def check_registry_and_processes(shape: Shape, data_dir: Path) -> None:
    records = {(rec.kind, rec.name): rec for rec in Registry().list()}
    assert sorted(records) == [("job", shape.name), ("service", shape.service)]
    job = records["job", shape.name]
    assert (job.profile, job.state) == (shape.profile, "COMPLETED")
    assert records["service", shape.service].state == "DELETED"
    # Deleting stopped every replica, the front port and the supervisor: nothing left that runs
    # in, or names, the tier's directories (the kernel itself has exited by now).
    assert processes_mentioning(data_dir / "tiers") == []


def test_quickstart_trains_serves_the_checkpoint_and_cleans_up(
    kernel_env: dict[str, str], tmp_path: Path
) -> None:
    out = execute("quickstart.ipynb", kernel_env, tmp_path)
    assert out["parameters"] == "" and out["load"] == ""
    check_quickstart(out, "torch gloo" if torch_available() else "plain Python", Shape())
    check_registry_and_processes(Shape(), Path(kernel_env["JUPYTER_DATA_DIR"]))


def test_quickstart_in_a_kernel_shows_the_live_widgets(kernel_env: dict[str, str], tmp_path: Path) -> None:
    """Without JUPYTER_TIERS_DISPLAY=text a kernel gets the widgets; --wait still ends headless
    (no front end syncs a widget) and shows only the summary lines, the logs going to the widget."""
    env = {k: v for k, v in kernel_env.items() if k != "JUPYTER_TIERS_DISPLAY"}
    nb = run("quickstart.ipynb", env, tmp_path)
    # The line is kept current (display.LiveLine): the service the notebook deletes in its last
    # cell reads DELETED in the saved notebook when the watcher saw the deletion before the run
    # ended, else still its READY summary (which one depends on timing: both are true lines).
    deleted = re.compile(r"^service predictor DELETED: deleted — .* — model from (\S+/\d+) \((\S+)\)$")
    serve = re.compile(f"(?:{SERVE_SUMMARY.pattern})|(?:{deleted.pattern})")
    for tag, summary in (("train", TRAIN_SUMMARY), ("serve", serve)):
        (cell,) = [c for c in nb.cells if c.metadata["tags"] == [tag]]
        widgets = [o for o in cell.outputs if o.output_type == "display_data" and WIDGET_MIME in o.data]
        assert len(widgets) == 1, cell.outputs
        # The summary goes out beside the widget as a plain-text bundle (display.plain_only).
        plain = [o.data["text/plain"] for o in cell.outputs
                 if o.output_type == "display_data" and "jt-plain-summary" in o.data.get("text/html", "")]
        # Kept current (display.LiveLine): the summary, and how to get the live view back.
        assert len(plain) == 1, cell.outputs
        hint, _, final = plain[0].partition("\n")
        assert summary.fullmatch(final) and hint.startswith("(live view: %tiers attach "), cell.outputs
    assert texts(nb)["query"].endswith("the true line gives 7\n")


def test_quickstart_without_torch_all_reduces_through_files(
    kernel_env: dict[str, str], tmp_path: Path
) -> None:
    # A `torch` that cannot be imported, first on the path of the kernel and of its ranks.
    blocker = tmp_path / "no-torch" / "torch"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('torch is hidden by this test')\n")
    env = {**kernel_env, "PYTHONPATH": str(blocker.parent)}
    out = execute("quickstart.ipynb", env, tmp_path)
    check_quickstart(out, "plain Python", Shape())
    job = next(rec for rec in Registry().list() if rec.kind == "job")
    exchange = Path(job.jobdir) / "allreduce"
    assert sorted(p.name for p in exchange.iterdir()) == sorted(
        f"{step}-{rank}.json" for step in range(1, 11) for rank in (0, 1)
    )


def test_quickstart_template_runs_under_papermill_with_overrides(
    kernel_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``papermill quickstart.ipynb out.ipynb -p profile lab -p serve_profile lab-serve -p nodes 3
    -p replicas 2``: the template runs unchanged on other profiles, with 3 ranks and 2 replicas
    behind one URL."""
    config = tmp_path / "tiers.yaml"
    config.write_text(textwrap.dedent("""\
        profiles:
          lab:
            tier: local
            description: the lab's machine
          lab-serve:
            tier: local
        """))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(config))
    env = {**kernel_env, "JUPYTER_TIERS_CONFIG": str(config)}
    result = subprocess.run(
        [sys.executable, "-m", "papermill", str(EXAMPLES / "quickstart.ipynb"), str(tmp_path / "out.ipynb"),
         "-p", "profile", "lab", "-p", "serve_profile", "lab-serve", "-p", "nodes", "3",
         "-p", "replicas", "2", "-p", "service", "lab-model",
         "--cwd", str(tmp_path), "--kernel", "python3", "--no-progress-bar"],
        env=env, capture_output=True, text=True, check=False, timeout=900,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    nb = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    tags = [c.metadata["tags"] for c in nb.cells if c.cell_type == "code"]
    assert tags[:2] == [["parameters"], ["injected-parameters"]], tags
    injected = nb.cells[[c.metadata.get("tags") for c in nb.cells].index(["injected-parameters"])].source
    for assignment in ('profile = "lab"', 'serve_profile = "lab-serve"', "nodes = 3", "replicas = 2"):
        assert assignment in injected, injected

    shape = Shape(profile="lab", serve_profile="lab-serve", nodes=3, service="lab-model", replicas=2)
    out = texts(nb)
    check_quickstart(out, "torch gloo" if torch_available() else "plain Python", shape)
    check_registry_and_processes(shape, Path(kernel_env["JUPYTER_DATA_DIR"]))


def test_main_command_prints_both_summary_lines_and_the_answer(kernel_env: dict[str, str]) -> None:
    """What ``bash examples/run_quickstart.sh`` prints after its bootstrap: run_notebook.py's
    output, cell by cell, in order."""
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "run_notebook.py"), str(EXAMPLES / "quickstart.ipynb")],
        env={k: v for k, v in kernel_env.items() if k != "JUPYTER_TIERS_DISPLAY"},  # it sets it
        capture_output=True, text=True, check=False, timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    train = next(i for i, ln in enumerate(lines) if TRAIN_SUMMARY.match(ln))
    serve = next(i for i, ln in enumerate(lines) if SERVE_SUMMARY.match(ln))
    answer = next(i for i, ln in enumerate(lines) if ln.endswith("; the true line gives 7"))
    assert train < serve < answer < lines.index("service predictor deleted"), result.stdout
    assert re.fullmatch(r"y\(2\) = \d+\.\d{4} from step-00010\.json \(step 10\); the true line gives 7",
                        lines[answer]), lines[answer]
