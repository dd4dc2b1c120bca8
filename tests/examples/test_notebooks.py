"""The example notebooks, executed headless with nbclient as a user's CI would run them.

The kernel is the venv's ``python3`` (jupyter_client runs a ``python`` kernelspec with the
interpreter running the tests; its PATH starts with the venv so the local tier's ranks find the
same ``python3``). It gets its own HOME, Jupyter data dir and registry, and
``JUPYTER_TIERS_DISPLAY=text`` so ``--wait`` prints the streamed log and the summary as plain
text outputs. The cluster notebooks run against the Slurm test cluster with a temporary
tiers.yaml that defines ``sandbox`` (the profile ``jupyter tiers sandbox up`` writes); the
serving notebook against a Kubernetes API emulator (``python -m tests.k8s_emulator``) started for
the test, with a tiers.yaml that defines ``serving``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import re
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from jupyter_tiers import config
from jupyter_tiers.registry import Registry
from tests.helpers import cancel_registered_jobs

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
VENV_BIN = Path(sys.executable).parent
NOTEBOOKS = ("quickstart.ipynb", "ddp_slurm.ipynb", "teaching_lab.ipynb", "serve_k8s.ipynb",
             "serving.ipynb")
CELL_TIMEOUT = 600

SUMMARY_OK = re.compile(r"^job (\d+) COMPLETED in \d\d:\d\d:\d\d on (\S+)$")


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


def nodes_of(nodelist: str) -> list[str]:
    from jupyter_tiers.slurm.parse import expand_hostlist

    return expand_hostlist(nodelist)


# --- fixtures ----------------------------------------------------------------------------------
@pytest.fixture
def kernel_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The kernel's environment; also isolates this process (for the clean-up below)."""
    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "no-system-tiers.yaml")
    monkeypatch.setattr(config, "USER_PATH", tmp_path / "no-user-tiers.yaml")
    monkeypatch.delenv("JUPYTER_TIERS_CONFIG", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ)
    env.update(
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        HOME=str(home),  # no ~/.jupyter/tiers.yaml of the machine's user
        JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"),  # the local tier's job directories
        IPYTHONDIR=str(tmp_path / "ipython"),
        JUPYTER_TIERS_DISPLAY="text",
        PYDEVD_DISABLE_FILE_VALIDATION="1",
    )
    yield env
    # Leave no job running (a notebook that failed half-way may have left one).
    cancel_registered_jobs()


@pytest.fixture
def sandbox_env(
    kernel_env: dict[str, str], cluster_env: dict[str, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, str]:
    """kernel_env plus a tiers.yaml holding exactly the ``sandbox`` profile that
    ``jupyter tiers sandbox up`` writes for the running test cluster."""
    from jupyter_tiers import sandbox

    path = tmp_path / "tiers.yaml"
    sandbox.write_profile(path, sandbox.sandbox_profile(cluster_env))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    return {**kernel_env, "JUPYTER_TIERS_CONFIG": str(path)}


@dataclass
class K8sEmulator:
    """A Kubernetes API emulator running as ``python -m tests.k8s_emulator`` (its kubelet runs
    the pods as local processes under ``workdir``) and a fresh namespace in it."""

    kubeconfig: Path
    namespace: str
    workdir: Path


def _processes_under(workdir: Path) -> list[int]:
    """Pids of processes (pods) that run in, or name, ``workdir``: none may outlive the emulator."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cwd = os.readlink(proc / "cwd")
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if cwd.startswith(str(workdir)) or str(workdir) in cmdline:
            found.append(int(proc.name))
    return found


@pytest.fixture
def k8s_emulator(tmp_path: Path) -> Iterator[K8sEmulator]:
    """The emulator in a subprocess of its own session on a free port, stopped (with every pod
    process) after the test."""
    from kubernetes import client
    from kubernetes import config as kube_config

    workdir = tmp_path / "k8s-emulator"
    kubeconfig = tmp_path / "kubeconfig"
    log = (tmp_path / "k8s-emulator.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.k8s_emulator", "--port", "0", "--kubeconfig", str(kubeconfig),
         "--workdir", str(workdir)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=log, start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()  # printed once it serves
        assert url.startswith("http://"), (tmp_path / "k8s-emulator.log").read_text()
        namespace = f"nb-{uuid.uuid4().hex[:8]}"
        api = kube_config.new_client_from_config(config_file=str(kubeconfig))
        with api:
            client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
        yield K8sEmulator(kubeconfig, namespace, workdir)
    finally:
        proc.send_signal(signal.SIGTERM)  # the emulator stops its kubelet, which kills every pod
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()
        orphans = _processes_under(workdir)
        for pid in orphans:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        assert not orphans, f"pod processes outlived the emulator: {orphans}"


@pytest.fixture
def serving_env(
    k8s_emulator: K8sEmulator, kernel_env: dict[str, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, str]:
    """kernel_env plus a tiers.yaml holding a ``serving`` profile for the emulator's namespace.
    (The emulator comes first so that it is stopped last, after kernel_env's clean-up.)"""
    path = tmp_path / "tiers.yaml"
    path.write_text(textwrap.dedent(f"""\
        profiles:
          serving:
            tier: kubernetes
            kubeconfig: {k8s_emulator.kubeconfig}
            namespace: {k8s_emulator.namespace}
            defaults: {{image: "python:3.11-slim"}}
        """))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    return {**kernel_env, "JUPYTER_TIERS_CONFIG": str(path)}


# --- helpers -----------------------------------------------------------------------------------
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def run(name: str, env: dict[str, str], cwd: Path) -> nbformat.NotebookNode:
    """Run the notebook in ``cwd`` (no ./tiers.yaml there) and return it with its outputs. An
    error in any cell fails the test with the cell and its traceback."""
    nb = nbformat.read(EXAMPLES / name, as_version=4)
    client = NotebookClient(
        nb, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    )
    client.execute(env=env)
    return nb


def texts(nb: nbformat.NotebookNode) -> dict[str, str]:
    """Each code cell's text output (streams and text/plain), by the cell's tag."""
    out: dict[str, str] = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        (tag,) = cell.metadata["tags"]
        parts = []
        for output in cell.outputs:
            if output.output_type == "stream":
                parts.append(output.text)
            elif output.output_type in ("execute_result", "display_data"):
                parts.append(output.data.get("text/plain", "") + "\n")
        out[tag] = "".join(parts)
    return out


def execute(name: str, env: dict[str, str], cwd: Path) -> dict[str, str]:
    return texts(run(name, env, cwd))


def last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert lines, "the cell printed nothing"
    return lines[-1]


# --- the files themselves ----------------------------------------------------------------------
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_valid_stripped_and_python3(name: str) -> None:
    nb = nbformat.read(EXAMPLES / name, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    assert nb.cells[0].cell_type == "markdown"
    for cell in nb.cells:
        assert len(cell.metadata.get("tags", [])) == 1, cell.source[:60]
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_a_papermill_template(name: str) -> None:
    """The first code cell is tagged ``parameters`` and every magic line takes its profile from
    it, so ``papermill NB out -p profile P`` runs the notebook unchanged on another profile."""
    nb = nbformat.read(EXAMPLES / name, as_version=4)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    first = code_cells[0]
    assert first.metadata["tags"] == ["parameters"]
    assert "profile" in first.source and "%" not in first.source, first.source
    params: dict[str, object] = {}
    exec(first.source, {}, params)  # plain assignments of literals, nothing else
    magic_lines = [ln for c in code_cells for ln in c.source.splitlines()
                   if re.match(r"%%?(slurm_train|k8s_serve)\b", ln)]
    assert magic_lines, name
    for line in magic_lines:
        assert "--profile {profile}" in line, line
        for var in re.findall(r"\{(\w+)\}", line):
            assert var in params, f"{line}: {{{var}}} is not a parameter"


def test_notebooks_match_their_generator() -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "make_notebooks.py"), "--check"],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stderr


def test_kernel_is_the_venv_python(kernel_env: dict[str, str], tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "py"}})
    nb.cells.append(nbformat.v4.new_code_cell(
        "import os, shutil, sys, jupyter_tiers\n"
        "print(sys.executable)\nprint(shutil.which('python3'))\nprint(jupyter_tiers.__file__)\n"
        "print(os.environ['HOME'])\nprint(os.environ['JUPYTER_TIERS_DISPLAY'])",
        metadata={"tags": ["probe"]},
    ))
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute(env=kernel_env)
    lines = nb.cells[0].outputs[0].text.splitlines()
    assert Path(lines[0]).parent == VENV_BIN
    assert Path(lines[1]).parent == VENV_BIN  # what the local tier's ranks run
    assert Path(lines[2]).is_relative_to(ROOT)
    assert lines[3:] == [kernel_env["HOME"], "text"]


# --- quickstart (local tier, no profile) -------------------------------------------------------
def check_quickstart(out: dict[str, str], backend: str) -> None:
    train = out["train"]
    lines = train.splitlines()
    header = re.fullmatch(r"job (\d+) \(quickstart\) submitted to local: 2 ranks", lines[0])
    assert header, train
    job_id = header.group(1)

    losses = re.findall(r"^0: step +(\d+) loss ([\d.]+)$", train, re.M)
    assert [int(s) for s, _ in losses] == list(range(1, 11)), train
    values = [float(v) for _, v in losses]
    assert all(b <= a for a, b in itertools.pairwise(values)), values
    assert values[-1] < values[0] / 10, values

    finals = re.findall(r"^(\d): rank \1 of 2: w=(\S+) b=(\S+) \((.+)\)$", train, re.M)
    assert sorted(r for r, *_ in finals) == ["0", "1"], train
    assert {(w, b, how) for _, w, b, how in finals} == {(finals[0][1], finals[0][2], backend)}, (
        "the ranks disagree: the all-reduce did not average their gradients"
    )
    w, b = float(finals[0][1]), float(finals[0][2])
    assert abs(w - 3) < 0.1 and abs(b - 1) < 0.05, (w, b)

    summary = SUMMARY_OK.match(last_line(train))
    assert summary, train
    assert summary.groups() == (job_id, "local[0-1]")

    table = out["jobs"].splitlines()
    assert table[0].split()[:6] == ["ID", "KIND", "NAME", "PROFILE", "TIER", "STATE"]
    assert table[1].split()[:8] == [job_id, "job", "quickstart", "local", "local", "COMPLETED", "2",
                                    "local[0-1]"]


def test_quickstart_runs_on_the_local_tier(kernel_env: dict[str, str], tmp_path: Path) -> None:
    out = execute("quickstart.ipynb", kernel_env, tmp_path)
    check_quickstart(out, "torch gloo" if torch_available() else "plain Python")
    assert out["load"] == ""
    (record,) = Registry().list()
    assert (record.profile, record.name, record.state) == ("local", "quickstart", "COMPLETED")


def test_quickstart_in_a_kernel_shows_the_live_widget(kernel_env: dict[str, str], tmp_path: Path) -> None:
    """Without JUPYTER_TIERS_DISPLAY=text a kernel gets the widget; --wait still ends headless
    (no front end syncs the widget) and prints only the summary, the log going to the widget."""
    env = {k: v for k, v in kernel_env.items() if k != "JUPYTER_TIERS_DISPLAY"}
    nb = run("quickstart.ipynb", env, tmp_path)
    (cell,) = [c for c in nb.cells if c.metadata["tags"] == ["train"]]
    widgets = [o for o in cell.outputs if o.output_type == "display_data" and WIDGET_MIME in o.data]
    assert len(widgets) == 1, cell.outputs
    streams = "".join(o.text for o in cell.outputs if o.output_type == "stream")
    assert SUMMARY_OK.fullmatch(streams.strip()), streams
    (record,) = Registry().list()
    assert record.state == "COMPLETED"


def test_quickstart_without_torch_all_reduces_through_files(
    kernel_env: dict[str, str], tmp_path: Path
) -> None:
    # A `torch` that cannot be imported, first on the path of the kernel and of its ranks.
    blocker = tmp_path / "no-torch" / "torch"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('torch is hidden by this test')\n")
    env = {**kernel_env, "PYTHONPATH": str(blocker.parent)}
    out = execute("quickstart.ipynb", env, tmp_path)
    check_quickstart(out, "plain Python")
    (record,) = Registry().list()
    exchange = Path(record.jobdir) / "allreduce"
    assert sorted(p.name for p in exchange.iterdir()) == sorted(
        f"{step}-{rank}.json" for step in range(1, 11) for rank in (0, 1)
    )


# --- on the Slurm test cluster -----------------------------------------------------------------
@pytest.mark.cluster
@pytest.mark.timeout(1200)
def test_ddp_slurm_trains_on_two_nodes_and_saves_a_checkpoint(
    sandbox_env: dict[str, str], tmp_path: Path
) -> None:
    if not torch_available():
        pytest.fail("torch is not installed in the venv; tests/run.sh installs it")
    out = execute("ddp_slurm.ipynb", sandbox_env, tmp_path)
    assert re.search(r"^\s+sandbox\s+slurm\s+127\.0\.0\.1", out["profiles"], re.M), out["profiles"]

    train = out["train"]
    header = re.match(r"job (\d+) \(ddp-demo\) submitted to sandbox: 4 ranks\n", train)
    assert header, train
    job_id = header.group(1)
    ranks = re.findall(r"^(\d): rank \1 of 4 on (node\d+) \(local rank ([01])\)$", train, re.M)
    assert sorted(r for r, _, _ in ranks) == ["0", "1", "2", "3"], train
    per_node: dict[str, list[str]] = {}
    for _, node, local in ranks:
        per_node.setdefault(node, []).append(local)
    assert len(per_node) == 2 and all(sorted(v) == ["0", "1"] for v in per_node.values()), ranks

    losses = [float(v) for v in re.findall(r"^0: step +\d+ mean loss ([\d.]+)$", train, re.M)]
    assert len(losses) == 3 and losses[-1] < losses[0], train
    checksums = re.findall(r"^(\d): rank \1 weights checksum (\S+)$", train, re.M)
    assert len(checksums) == 4 and len({c for _, c in checksums}) == 1, "DDP replicas diverged"
    saved = re.search(r"^0: checkpoint saved: (\S+/checkpoint\.pt) \((\d+) bytes\)$", train, re.M)
    assert saved, train
    summary = SUMMARY_OK.match(last_line(train))
    assert summary and summary.group(1) == job_id, train
    assert sorted(nodes_of(summary.group(2))) == sorted(per_node)

    # The sandbox's compute nodes share this machine's filesystem: the checkpoint can be read.
    import torch

    checkpoint = torch.load(saved.group(1), weights_only=True)
    assert checkpoint["step"] == 30 and set(checkpoint["model"]) == {
        "0.weight", "0.bias", "2.weight", "2.bias"
    }

    status = out["ranks"].splitlines()
    assert status[0] == f"COMPLETED on {summary.group(2)}"
    assert [re.sub(r" on node\d+", "", ln) for ln in status[1:5]] == [
        f"rank {r}: exited, exit 0" for r in range(4)
    ]
    assert status[5] == f"checkpoint directory: {Path(saved.group(1)).parent}"
    assert out["logs"].splitlines() == [
        f"rank 0 weights checksum {checksums[0][1]}",
        f"checkpoint saved: {saved.group(1)} ({saved.group(2)} bytes)",
    ]


@pytest.mark.cluster
@pytest.mark.timeout(1200)
def test_teaching_lab_steps(
    sandbox_env: dict[str, str], cluster_env: dict[str, str], tmp_path: Path
) -> None:
    out = execute("teaching_lab.ipynb", sandbox_env, tmp_path)
    assert re.search(r"^\s+sandbox\s+slurm", out["load"], re.M), out["load"]

    # Gang allocation: 4 ranks on 4 nodes, all started before any of them finished.
    gang = SUMMARY_OK.match(last_line(out["gang"]))
    assert gang and len(nodes_of(gang.group(2))) == 4, out["gang"]
    started = re.findall(r"^(\d): rank \1 on (node\d+) started at [\d.]+$", out["gang"], re.M)
    assert len(started) == 4 and len({n for _, n in started}) == 4, out["gang"]
    spread = re.search(
        rf"^gang: 4 ranks on 4 nodes \({re.escape(gang.group(2))}\) started within ([\d.]+) s$",
        out["gang-starts"], re.M,
    )
    assert spread, out["gang-starts"]
    assert "all ranks were running at the same moment: True" in out["gang-starts"], out["gang-starts"]

    # Placement: both nodes under one leaf switch, and rank 0 named the right one.
    nodes = int(cluster_env["JT_CLUSTER_NODES"])
    leaves = {
        "leaf1": {f"node{i}" for i in range(1, nodes // 2 + 1)},
        "leaf2": {f"node{i}" for i in range(nodes // 2 + 1, nodes + 1)},
    }
    placed = SUMMARY_OK.match(last_line(out["switches"]))
    assert placed, out["switches"]
    on_leaf = re.search(r"^0: nodes (\S+) are all on leaf switch (\S+)$", out["switches"], re.M)
    assert on_leaf, out["switches"]
    assert set(on_leaf.group(1).split(",")) == set(nodes_of(placed.group(2)))
    assert set(nodes_of(placed.group(2))) <= leaves[on_leaf.group(2)]

    # A pending reason, then cancel.
    held = re.fullmatch(
        r"job (\d+) \(held\) submitted to sandbox: 1 rank — follow it with %tiers attach \1\n",
        out["held"],
    )
    assert held, out["held"]
    held_id = held.group(1)
    assert out["held-reason"] == f"job {held_id} is PENDING, reason: JobHeldUser\n"
    assert out["held-cancel"] == (
        f"cancel requested for job {held_id} (held)\njob {held_id} is CANCELLED\n"
    )

    # Fail-stop: rank 3 exits 7, the other three are stopped, the summary names rank 3.
    failed = re.match(
        r"^job \d+ FAILED in \d\d:\d\d:\d\d — first failure: rank 3 \((node\d+)\) exit 7;"
        r" 3 ranks stopped$",
        last_line(out["fail"]),
    )
    assert failed, out["fail"]
    assert "3: rank 3: giving up" in out["fail"]
    ranks = out["fail-ranks"].splitlines()
    assert ranks[3] == f"rank 3 ({failed.group(1)}) exit 7"
    for r in range(3):
        assert re.fullmatch(rf"rank {r} \(node\d+\) stopped by signal \d+", ranks[r]), ranks

    states = {r.name: r.state for r in Registry().list()}
    assert states == {"gang": "COMPLETED", "placed": "COMPLETED", "held": "CANCELLED", "fail-stop": "FAILED"}


# --- serving on Kubernetes (the API emulator) --------------------------------------------------
SERVE_READY = re.compile(
    r"^service echo READY (\d)/(\d) in \d\d:\d\d:\d\d — http://echo\.(\S+)\.svc:8000 \(revision (\d+)\)$"
)
POD = r"echo-[a-z0-9]+-[a-z0-9]+"


def test_serve_k8s_deploys_queries_updates_scales_and_deletes(
    serving_env: dict[str, str], k8s_emulator: K8sEmulator, tmp_path: Path
) -> None:
    out = execute("serve_k8s.ipynb", serving_env, tmp_path)
    ns = k8s_emulator.namespace
    assert out["load"] == ""
    assert re.search(rf"^  serving\s+kubernetes\s+kubeconfig context, namespace {ns}\s+from .*tiers\.yaml$",
                     out["profiles"], re.M), out["profiles"]

    # First apply: two pods of revision 1, each logging its start, then the summary.
    serve = out["serve"]
    assert serve.splitlines()[0] == (
        f"service echo applied to serving (namespace {ns}): 2 replicas, image python:3.11-slim"
    ), serve
    ready = SERVE_READY.match(last_line(serve))
    assert ready and ready.groups() == ("2", "2", ns, "1"), serve
    started = set(re.findall(rf"^({POD}): serving y = 3x \+ 1 on port 8000$", serve, re.M))
    assert len(started) == 2, serve
    assert out["query"] == '{"x": 2.0, "y": 7.0}\n'

    table = out["jobs"].splitlines()
    assert table[0].split()[:8] == ["ID", "KIND", "NAME", "PROFILE", "TIER", "STATE", "SIZE", "WHERE"]
    assert table[1].split()[:8] == ["echo", "service", "echo", "serving", "kubernetes", "READY", "2/2",
                                    f"http://echo.{ns}.svc:8000"], out["jobs"]

    # The changed body rolls the pods to revision 2: new pods, the new model.
    update = out["update"]
    ready = SERVE_READY.match(last_line(update))
    assert ready and ready.groups() == ("2", "2", ns, "2"), update
    rolled = set(re.findall(rf"^({POD}): serving y = 3x \+ 2 on port 8000$", update, re.M))
    assert len(rolled) == 2 and not rolled & started, update
    assert out["query-again"] == '{"x": 2.0, "y": 8.0}\n'

    # Scaled to 3 without a new revision.
    scale = out["scale"].splitlines()
    assert scale[0] == "service echo READY 3/3 (revision 2)", out["scale"]
    pods = [re.fullmatch(rf"  ({POD}): Running, ready", ln) for ln in scale[1:]]
    assert len(pods) == 3 and all(pods), out["scale"]
    assert rolled <= {m.group(1) for m in pods if m}, out["scale"]

    # The merged log: pod-prefixed lines, the last request among them.
    logs = out["logs"].splitlines()
    assert 1 <= len(logs) <= 5, out["logs"]
    assert all(re.match(rf"{POD}: ", ln) for ln in logs), out["logs"]
    assert any(re.fullmatch(rf"({POD}): POST /predict x=2\.0 -> y=8\.0", ln) for ln in logs), out["logs"]

    assert out["delete"] == "service echo deleted\n"
    table = out["jobs-after"].splitlines()
    assert table[1].split()[:6] == ["echo", "service", "echo", "serving", "kubernetes", "DELETED"], (
        out["jobs-after"]
    )
    (record,) = Registry().list()
    assert (record.kind, record.name, record.state) == ("service", "echo", "DELETED")


def test_no_stray_tiers_yaml_next_to_the_notebooks() -> None:
    # A ./tiers.yaml in examples/ would become every notebook's project layer.
    assert not (EXAMPLES / "tiers.yaml").exists()


# --- serving.ipynb: vLLM / TGI cells, run as shipped (--dry-run: no cluster) ------------------
def manifests(text: str) -> dict[str, dict]:
    """The objects one dry-run cell printed, by kind (each cell renders one of each kind)."""
    import yaml

    objects = [o for o in yaml.safe_load_all(text) if o]
    by_kind = {o["kind"]: o for o in objects}
    assert len(by_kind) == len(objects), [o["kind"] for o in objects]
    return by_kind


def test_serving_dry_runs_render_gpus_autoscaling_and_blue_green(
    kernel_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's serving profile, with no kubeconfig anywhere: a dry run asks nothing of an
    API server when the profile names its namespace."""
    path = tmp_path / "tiers.yaml"
    path.write_text(textwrap.dedent("""\
        profiles:
          serving:
            tier: kubernetes
            namespace: team-llm
            model_volume: {pvc: models}
            defaults: {node_selector: {pool: gpu}}
        """))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    env = {**kernel_env, "JUPYTER_TIERS_CONFIG": str(path), "KUBECONFIG": str(tmp_path / "none")}
    out = execute("serving.ipynb", env, tmp_path)
    assert out["load"] == "" and out["autoscale-patch"] == ""

    vllm = manifests(out["vllm"])
    assert sorted(vllm) == ["ConfigMap", "Deployment", "Service"]
    command = vllm["ConfigMap"]["data"]["command.sh"]
    assert command.startswith("vllm serve /models/llama-3.1-8b-ft --port 8000"), command
    dep = vllm["Deployment"]
    assert (dep["metadata"]["name"], dep["metadata"]["namespace"]) == ("llama-vllm", "team-llm")
    assert dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "vllm/vllm-openai:v0.6.0"
    assert container["resources"] == {"requests": {"cpu": "8", "memory": "32Gi"},
                                      "limits": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}}
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    models = {"name": "models", "persistentVolumeClaim": {"claimName": "models", "readOnly": True}}
    assert models in pod["volumes"], pod["volumes"]
    assert pod["nodeSelector"] == {"pool": "gpu"}
    assert vllm["Service"]["spec"]["ports"][0]["port"] == 8000

    tgi = manifests(out["tgi"])
    (container,) = tgi["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["image"].startswith("ghcr.io/huggingface/text-generation-inference:")
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}} in (
        container["env"])
    assert "Secret" not in tgi  # an existing Secret is referenced, not made
    assert tgi["ConfigMap"]["data"]["command.sh"].startswith("text-generation-launcher --model-id /models/")

    scaled = manifests(out["autoscale"])
    assert "replicas" not in scaled["Deployment"]["spec"]  # left to the autoscaler
    hpa = scaled["HorizontalPodAutoscaler"]["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (1, 4)
    assert hpa["scaleTargetRef"]["name"] == "llama-vllm"
    assert hpa["metrics"] == [{"type": "Pods", "pods": {
        "metric": {"name": "vllm_num_requests_waiting"},
        "target": {"type": "AverageValue", "averageValue": "5"}}}]  # the --patch replaced CPU

    blue = manifests(out["bluegreen"])
    assert blue["Deployment"]["metadata"]["name"] == "llama-vllm-blue"
    assert blue["Service"]["metadata"]["name"] == "llama-vllm"
    assert blue["Service"]["spec"]["selector"]["jupyter-tiers/color"] == "blue"
    assert "llama-3.1-8b-ft-v2" in blue["ConfigMap"]["data"]["command.sh"]
    assert Registry().list() == []  # a dry run records nothing
