"""The example notebooks, executed headless with nbclient as a user's CI would run them.

The cluster notebooks run against the Slurm test cluster with a temporary tiers.yaml that defines
``sandbox`` (the profile ``jupyter tiers sandbox up`` writes); the serving notebook against a
Kubernetes API emulator (``python -m tests.k8s_emulator``) started for the test, with a tiers.yaml
that defines ``serving`` (fixtures in conftest.py). The quickstart has its own module.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from jupyter_tiers.config.registry import Registry

from .conftest import K8sEmulator
from .nbrun import EXAMPLES, SUMMARY_OK, VENV_BIN, execute, last_line, nodes_of, torch_available

ROOT = EXAMPLES.parent
NOTEBOOKS = ("quickstart.ipynb", "ddp_slurm.ipynb", "teaching_lab.ipynb", "serve_k8s.ipynb",
             "serving.ipynb", "train_then_serve.ipynb")


# --- the files themselves ----------------------------------------------------------------------
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_valid_stripped_and_python3(name: str) -> None:
    nb = nbformat.read(EXAMPLES / name, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    assert nb.cells[0].cell_type == "markdown"
    for cell in nb.cells:
        # One tag, the cell's id, by which the tests find its output; a cell that shows an error
        # on purpose also carries nbclient's and papermill's `raises-exception`.
        assert cell.metadata.get("tags", [])[:1] == [cell.id], cell.source[:60]
        assert cell.metadata["tags"][1:] in ([], ["raises-exception"]), cell.source[:60]
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
    magic_lines = [(ln, "raises-exception" in c.metadata["tags"]) for c in code_cells
                   for ln in c.source.splitlines() if re.match(r"%%?(slurm_train|k8s_serve)\b", ln)]
    assert magic_lines, name
    for line, shows_an_error in magic_lines:
        # (A cell showing a refusal on purpose may name the built-in local profile.)
        assert re.search(r"--profile \{\w*profile\}", line) or (
            shows_an_error and "--profile local " in line), line
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


# --- on the Slurm test cluster -----------------------------------------------------------------
@pytest.mark.cluster
@pytest.mark.slurm_beside
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
    # Saved into $JT_CHECKPOINT_DIR ({workdir}/{name}/{job_id}/checkpoints), and recorded.
    assert saved.group(1).endswith(f"/ddp-demo/{job_id}/checkpoints/checkpoint.pt"), train
    summary = SUMMARY_OK.match(last_line(train))
    assert summary and summary.group(1) == job_id, train
    assert summary["checkpoint"] == saved.group(1), train
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
    assert status[5] == f"newest checkpoint: {saved.group(1)}"
    assert out["logs"].splitlines() == [
        f"rank 0 weights checksum {checksums[0][1]}",
        f"checkpoint saved: {saved.group(1)} ({saved.group(2)} bytes)",
    ]


@pytest.mark.cluster
@pytest.mark.slurm_beside
@pytest.mark.timeout(1200)
def test_teaching_lab_steps(
    lab_env: dict[str, str], cluster_env: dict[str, str], tmp_path: Path
) -> None:
    out = execute("teaching_lab.ipynb", lab_env, tmp_path)
    check_teaching_lab_serving(out, tmp_path / "scratch")
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
    assert "not every rank started" not in out["fail"], out["fail"]  # it failed once all had started
    ranks = out["fail-ranks"].splitlines()
    assert ranks[3] == f"rank 3 ({failed.group(1)}) exit 7"
    for r in range(3):
        assert re.fullmatch(rf"rank {r} \(node\d+\) stopped by signal \d+", ranks[r]), ranks

    states = {r.name: r.state for r in Registry().list()}
    assert states == {"gang": "COMPLETED", "placed": "COMPLETED", "held": "CANCELLED", "fail-stop": "FAILED",
                      "server-as-job": "CANCELLED", "lab-fit": "COMPLETED", "lab-model": "DELETED"}
    assert "ddp-as-service" not in states  # refused: nothing was made


def check_teaching_lab_serving(out: dict[str, str], scratch: Path) -> None:
    """The lab's serving section: the guard both ways, a refusal for want of shared storage, then
    the checkpoint of a sandbox job served on the local tier through the lab profile's path_map."""
    assert re.fullmatch(
        r"UsageError: %%k8s_serve: this cell calls init_process_group \(line 3\) — a training shape;"
        r" multi-rank training belongs on %%slurm_train: .*\. Add --force to serve it anyway\n",
        out["guard-serve"]), out["guard-serve"]
    warning, submitted = out["guard-train"].splitlines()
    assert re.fullmatch(r"%%slurm_train warning: this cell calls serve_forever \(line 3\) — a long-running"
                        r" server; a server belongs on %%k8s_serve: .*", warning), warning
    server = re.fullmatch(r"job (\d+) \(server-as-job\) submitted to sandbox: 1 rank — .*", submitted)
    assert server, submitted
    assert out["guard-train-cancel"] == (
        f"cancel requested for job {server.group(1)} (server-as-job)\njob {server.group(1)} is CANCELLED\n")

    fit = re.match(r"job (\d+) \(lab-fit\) submitted to sandbox: 2 ranks", out["fit"])
    assert fit, out["fit"]
    job_id = fit.group(1)
    checkpoint = scratch / "lab-fit" / job_id / "checkpoints" / "step-00010.json"
    fitted = SUMMARY_OK.match(last_line(out["fit"]))
    assert fitted and fitted["checkpoint"] == str(checkpoint), out["fit"]
    assert out["no-storage"] == (
        f"UsageError: --model-from: job {job_id} (lab-fit) ran on slurm profile 'sandbox'; profile 'local'"
        f" has no path_map covering {checkpoint} (add path_map: {{CLUSTER_PREFIX:"
        " /WHERE/IT/IS/MOUNTED/HERE})\n"), out["no-storage"]

    ckpt = json.loads(checkpoint.read_text())
    serve = out["serve"]
    assert serve.splitlines()[0] == (
        f"service lab-model applied to sandbox-serve: 1 replica, model from sandbox/{job_id} (lab-fit)")
    assert re.search(rf"^lab-model-\S+: serving y = {ckpt['w']:.4f}x \+ {ckpt['b']:.4f} \(step-00010\.json,"
                     r" step 10\) on port \d+$", serve, re.M), serve
    ready = (r"service lab-model READY 1/1(?: in \d\d:\d\d:\d\d)? — http://127\.0\.0\.1:\d+ \(revision 1\)"
             rf" — model from sandbox/{job_id} \(lab-fit\)")
    assert re.fullmatch(ready, last_line(serve)), serve
    assert out["query"] == (f"y(2) = {2 * ckpt['w'] + ckpt['b']:.4f} from step-00010.json (step 10); "
                            "the true line gives 7\n"), out["query"]
    assert out["delete"] == "service lab-model deleted\n"


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
