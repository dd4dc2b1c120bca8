"""Write the example notebooks (outputs stripped) from the cells below.

    .venv/bin/python examples/make_notebooks.py          # rewrite examples/*.ipynb
    .venv/bin/python examples/make_notebooks.py --check  # exit 1 if a notebook differs

Edit the cells here, not in the .ipynb files, so the notebooks stay stripped and reviewable.
Each cell has a stable id and a tag; tests/examples finds the outputs it checks by tag.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

Cell = tuple[str, str, str]  # (kind "md" | "code" | "code-raises", tag, source)


def md(tag: str, text: str) -> Cell:
    return ("md", tag, textwrap.dedent(text).strip())


def code(tag: str, text: str, magic: str | None = None, raises: bool = False) -> Cell:
    """A code cell; ``magic`` is a first line kept apart so long magic lines stay readable here.
    ``raises``: the cell shows an error on purpose (tagged ``raises-exception``, which nbclient
    and papermill honour: the run goes on)."""
    body = textwrap.dedent(text).strip()
    return ("code-raises" if raises else "code", tag, f"{magic}\n{body}" if magic else body)


def linear_training() -> str:
    """The training cells' body: data-parallel fit of y = 3x + 1, checkpoints as JSON."""
    return """
import json
import os
import random

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
steps, lr = 10, 0.5

# This rank's shard of a tiny regression problem: y = 3x + 1 plus noise.
rng = random.Random(rank)
xs = [rng.uniform(-1, 1) for _ in range(64)]
ys = [3 * x + 1 + rng.gauss(0, 0.05) for x in xs]


def save_checkpoint(step, w, b, loss):
    \"\"\"Rank 0 keeps the model every 5 steps; the newest checkpoint is what gets served.\"\"\"
    path = os.path.join(os.environ["JT_CHECKPOINT_DIR"], f"step-{step:05d}.json")
    with open(path + ".tmp", "w") as f:
        json.dump({"w": w, "b": b, "step": step, "loss": loss}, f)
    os.replace(path + ".tmp", path)  # a reader never sees a half-written checkpoint


try:
    import torch
    import torch.distributed as dist
except ImportError:
    torch = None

if torch is not None:
    dist.init_process_group("gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    model = torch.nn.Linear(1, 1)
    with torch.no_grad():  # the same start on every rank
        model.weight.zero_()
        model.bias.zero_()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = torch.tensor(xs).unsqueeze(1), torch.tensor(ys).unsqueeze(1)
    for step in range(1, steps + 1):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        for p in model.parameters():  # all-reduce: average the gradients of all ranks
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        if rank == 0:
            print(f"step {step:2d} loss {mean_loss.item() / world:.4f}")
            if step % 5 == 0:
                save_checkpoint(step, model.weight.item(), model.bias.item(),
                                mean_loss.item() / world)
    w, b = model.weight.item(), model.bias.item()
    dist.barrier()  # leave together: a rank that exits while a peer still talks can abort it
    dist.destroy_process_group()
else:
    import pathlib
    import time

    exchange = pathlib.Path(os.environ["JT_JOB_DIR"]) / "allreduce"
    exchange.mkdir(exist_ok=True)

    def all_reduce_mean(step, values):
        \"\"\"Every rank writes its values for this step, then averages everyone's.\"\"\"
        tmp = exchange / f".{step}-{rank}.tmp"
        tmp.write_text(json.dumps(values))
        tmp.rename(exchange / f"{step}-{rank}.json")
        files = [exchange / f"{step}-{r}.json" for r in range(world)]
        while not all(f.exists() for f in files):
            time.sleep(0.01)
        return [sum(v) / world for v in zip(*(json.loads(f.read_text()) for f in files))]

    w = b = 0.0
    for step in range(1, steps + 1):
        errors = [w * x + b - y for x, y in zip(xs, ys)]
        loss = sum(e * e for e in errors) / len(xs)
        grad_w = sum(2 * e * x for e, x in zip(errors, xs)) / len(xs)
        grad_b = sum(2 * e for e in errors) / len(xs)
        grad_w, grad_b, mean_loss = all_reduce_mean(step, [grad_w, grad_b, loss])
        w, b = w - lr * grad_w, b - lr * grad_b
        if rank == 0:
            print(f"step {step:2d} loss {mean_loss:.4f}")
            if step % 5 == 0:
                save_checkpoint(step, w, b, mean_loss)

backend = "torch gloo" if torch is not None else "plain Python"
print(f"rank {rank} of {world}: w={w:.4f} b={b:.4f} ({backend})")
"""


def checkpoint_predictor(host: str, model: str = '"{model_path}"',
                         why: str = "the training job's newest checkpoint: --model-from fills it in") -> str:
    """The serving cells' body: a stdlib HTTP server for the checkpoint --model-from names."""
    return f"""
        import http.server
        import json
        import os
        import urllib.parse

        MODEL = {model}  # {why}
        with open(MODEL) as f:
            checkpoint = json.load(f)
        W, B, STEP = checkpoint["w"], checkpoint["b"], checkpoint["step"]


        class Predict(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # GET /healthz (the readiness probe), GET /predict?x=2
                url = urllib.parse.urlsplit(self.path)
                if url.path == "/healthz":
                    self.reply(200, "ok")
                elif url.path == "/predict":
                    self.predict(urllib.parse.parse_qs(url.query).get("x", ["0"])[0])
                else:
                    self.reply(404, {{"error": f"no route {{url.path}}"}})

            def do_POST(self):  # POST /predict {{"x": 2}}
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.predict(json.loads(body or b"{{}}").get("x", 0))

            def predict(self, x):
                x = float(x)
                y = W * x + B
                print(f"{{self.command}} /predict x={{x}} -> y={{y:.4f}}", flush=True)  # one line per request
                self.reply(200, {{"x": x, "y": y, "model": os.path.basename(MODEL), "step": STEP}})

            def reply(self, code, body):
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(code)
                kind = "text/plain" if isinstance(body, str) else "application/json"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format, *args):
                pass  # no access log: the probe would fill it; predict() logs what matters


        port = int(os.environ["JT_PORT"])  # the port the tier gives this replica
        print(f"serving y = {{W:.4f}}x + {{B:.4f}} ({{os.path.basename(MODEL)}}, step {{STEP}})"
              f" on port {{port}}", flush=True)
        http.server.ThreadingHTTPServer(("{host}", port), Predict).serve_forever()
        """


def query(url: str) -> str:
    """The cell asking the served model for y(2); ``url`` is the expression giving its URL."""
    return """
    import json
    import urllib.request

    url = URL


    def predict(x):
        request = urllib.request.Request(f"{url}/predict", data=json.dumps({"x": x}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)


    answer = predict(2.0)
    print(f"y({answer['x']:g}) = {answer['y']:.4f} from {answer['model']} (step {answer['step']}); "
          "the true line gives 7")
    """.replace("URL", url, 1)


QUICKSTART: list[Cell] = [
    md("intro", """
        # jupyter-tiers quickstart: train on two ranks, then serve the checkpoint

        `%%slurm_train` turns a cell into a distributed training job: every rank runs the cell's
        body. `%%k8s_serve` turns a cell into a service: the body is a server program. This
        notebook needs no cluster and no profile: without a `tiers.yaml` both run on the built-in
        **local tier**. Training ranks are local processes that get the environment a Slurm task
        gets (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`, `SLURM_PROCID`,
        ...) and fail-stop: if one rank fails, the others are stopped. Service replicas are local
        processes behind one loopback URL, with a readiness probe and restarts like a kubelet's.

        The same cells run on a Slurm cluster and a Kubernetes cluster by changing the profiles
        (see `tiers.yaml.template` and `train_then_serve.ipynb`).
        """),
    md("parameters-md", """
        The first code cell holds the notebook's parameters; the magic lines below use them as
        `{profile}`, `{nodes}`, `{name}`, ... It is tagged `parameters`, so papermill can run the
        notebook unchanged on other profiles or at another size:
        `papermill quickstart.ipynb out.ipynb -p profile lab -p serve_profile lab -p nodes 4`.
        """),
    code("parameters", """
        profile = "local"  # where it trains: the built-in local tier runs the ranks as processes here
        serve_profile = "local"  # where the checkpoint is served: a local or a kubernetes profile
        nodes = 2  # one rank per (emulated) node
        name = "quickstart"  # the training job; re-running the cell attaches to a live job of that name
        service = "predictor"  # the service serving its checkpoint
        replicas = 1
        """),
    code("load", "%load_ext jupyter_tiers"),
    md("train-md", """
        Two ranks (`--nodes 2`: two emulated nodes, one rank each) fit `y = 3x + 1` on their own
        shards of data and average their gradients after every step, the way data-parallel training
        does. With torch installed they all-reduce with `torch.distributed` over gloo, using the
        `env://` rendezvous the tier set up; without torch they do the same arithmetic in plain
        Python and exchange gradients through files in the job directory (`$JT_JOB_DIR`).

        Every rank gets `$JT_CHECKPOINT_DIR`; rank 0 saves the model there every 5 steps. When the
        job completes, the registry records the newest checkpoint, and the summary line names it.
        `--wait` blocks until the job ends and prints that line (in JupyterLab a live widget shows
        the job meanwhile; without `--wait` the cell returns at once). Every output line of a rank
        is prefixed with its rank number.
        """),
    code("train", linear_training(),
         magic="%%slurm_train --profile {profile} --nodes {nodes} --wait --name {name}"),
    md("serve-md", """
        **Serve the checkpoint.** `--model-from {name}` finds the newest job of that name (a job
        id or a `--out` variable work too), checks that it completed and left a checkpoint, and
        gives its path to the server as `{model_path}` in the body and as `$JT_MODEL_PATH`. On the
        local tier each replica gets its own free loopback port in `$JT_PORT`, and the service's
        one URL relays to the ready replicas; `--readiness /healthz` sends a request only to a
        replica that answers there. `--wait` blocks until the service is ready and prints its
        summary line with the URL; `--out svc` keeps the `Service` handle.
        """),
    code("serve", checkpoint_predictor("127.0.0.1"), magic=(
        "%%k8s_serve --profile {serve_profile} --name {service} --model-from {name} --replicas {replicas}"
        " --readiness /healthz --wait --out svc"
    )),
    md("query-md", "**Ask the model** at the service's URL (`svc.url`):"),
    code("query", query("svc.url")),
    md("jobs-md", """
        Every job and service is recorded in a local registry, so `%tiers jobs` lists them (after a
        kernel restart too); `%tiers logs ID`, `%tiers logs ID --rank 1`, `%tiers attach ID` and
        `%tiers cancel ID` work on a job by its id, `%tiers logs predictor`, `%tiers scale
        predictor 3` and `%tiers delete predictor` on the service by its name.
        """),
    code("jobs", "%tiers jobs"),
    md("delete-md", """
        **Clean up**: `%k8s_serve --delete` (the line form) stops every replica and the front port;
        the registry keeps the record, now `DELETED`.
        """),
    code("delete", "%k8s_serve --profile {serve_profile} --name {service} --delete"),
    md("next", """
        Next: `--dry-run` on either magic prints what would run without starting anything;
        `train_then_serve.ipynb` runs this pipeline on a Slurm cluster and a Kubernetes cluster,
        `ddp_slurm.ipynb` runs DDP with torchrun on Slurm, `serving.ipynb` shows vLLM and TGI
        serving cells, and `teaching_lab.ipynb` shows what a scheduler adds (gang allocation,
        topology-aware placement, pending reasons, fail-stop) on a cluster in a box.
        """),
]

TRAIN_THEN_SERVE: list[Cell] = [
    md("intro", """
        # Train on Slurm, serve on Kubernetes

        The quickstart's pipeline on two clusters: `%%slurm_train` fits the model on a Slurm
        cluster, whose ranks save checkpoints into `$JT_CHECKPOINT_DIR` on the cluster's shared
        storage; `%%k8s_serve --model-from` serves the newest one from a Kubernetes cluster that
        mounts the same storage. The two profiles say how the storage is shared:

        ```yaml
        profiles:
          hpc:
            tier: slurm
            host: login.cluster.example
            workdir: /scratch/alice/jupyter-tiers   # checkpoints: {workdir}/{name}/{job_id}/checkpoints
          serving:
            tier: kubernetes
            namespace: alice
            model_volume:                            # mounted read-only at /models in every pod
              nfs: {server: nfs.cluster.example, path: /scratch}
              path_map: {/scratch: /}                # a Slurm-side prefix -> its path in the volume
        ```

        so `/scratch/alice/jupyter-tiers/linear-fit/42/checkpoints/step-00010.json` on the cluster is
        `/models/alice/jupyter-tiers/linear-fit/42/checkpoints/step-00010.json` in a pod (`pvc:` and
        `host_path:` volumes work the same way, with an optional `sub_path`). `--model-from` refuses,
        in one line, a job that has not completed, one that left no checkpoint, and a checkpoint
        that no `path_map` entry covers.

        In this project's CI the notebook runs against the Slurm test cluster (`sandbox`, from
        `jupyter tiers sandbox up`) and the Kubernetes API emulator of its tests.
        """),
    code("parameters", """
        train_profile = "sandbox"  # a slurm profile
        serve_profile = "serving"  # a kubernetes profile whose model_volume shares the cluster's storage
        nodes = 2
        name = "linear-fit"  # the training job
        service = "linear"  # the service serving its checkpoint
        image = "python:3.11-slim"  # any image with a Python 3: the server uses the standard library
        replicas = 2
        """),
    code("load", """
        %load_ext jupyter_tiers
        %tiers profiles
        """),
    md("train-md", """
        **Train.** The quickstart's cell, on `nodes` Slurm nodes (2 as shipped; one rank each,
        `srun --kill-on-bad-exit`): rank 0 saves a checkpoint into `$JT_CHECKPOINT_DIR` every 5 steps.
        When the job completes, the same scheduler round trip that reports its state lists the
        directory, and the registry records the newest checkpoint; the summary line names it.
        `--out job` keeps the handle.
        """),
    code("train", linear_training(), magic=(
        "%%slurm_train --profile {train_profile} --nodes {nodes} --time 00:10:00 --wait --out job"
        " --name {name}"
    )),
    code("checkpoint", """
        status = job.status()
        print(f"job {job.id} {status.state.value}; newest checkpoint on the cluster: {status.checkpoint}")
        """),
    md("serve-md", """
        **Serve.** `--model-from job` (the `--out` variable; the job's id or name work too) resolves
        the checkpoint and maps it through the serving profile's `path_map` to where the pods see
        it: the body reads it from `$JT_MODEL_PATH` (the same path as `{model_path}` in the body).
        The pods listen on `$JT_PORT` (the `--port`), on every address so the Service reaches
        them; `--readiness /healthz` keeps traffic away from a pod until the model is loaded.
        """),
    code("serve", checkpoint_predictor(
        "0.0.0.0", 'os.environ["JT_MODEL_PATH"]', "the checkpoint, as this pod sees it (/models/...)"
    ), magic=(
        "%%k8s_serve --profile {serve_profile} --name {service} --model-from job --image {image}"
        " --replicas {replicas} --port 8000 --readiness /healthz --wait --out svc"
    )),
    md("query-md", """
        **Ask the model.** The Service's endpoint is reachable inside the cluster;
        `svc.port_forward()` opens a local port relayed to a ready pod through the API server.
        """),
    code("query", query("svc.port_forward()")),
    code("jobs", "%tiers jobs"),
    md("delete-md", """
        **Clean up** the service (the training job's record and its checkpoints stay).
        """),
    code("delete", "%k8s_serve --profile {serve_profile} --name {service} --delete"),
]

DDP_SLURM: list[Cell] = [
    md("intro", """
        # Distributed data parallel on Slurm with torchrun

        This notebook trains a tiny model with PyTorch DDP on **2 nodes x 2 processes** of a Slurm
        cluster. It uses the `sandbox` profile that `jupyter tiers sandbox up` writes into
        `~/.jupyter/tiers.yaml` (a real Slurm cluster on this machine); any slurm profile works the
        same way. The profile's `python` (or its `setup` lines) must give an interpreter with torch
        on the compute nodes.

        The parameters cell (tagged `parameters`) is what papermill overrides:
        `papermill ddp_slurm.ipynb out.ipynb -p profile hpc -p nodes 4 -p nproc_per_node 8`.
        """),
    code("parameters", """
        profile = "sandbox"  # a slurm profile of tiers.yaml
        nodes = 2
        nproc_per_node = 2  # torchrun workers per node (on GPU nodes: the GPUs per node)
        time = "00:10:00"  # the job's time limit
        name = "ddp-demo"
        """),
    code("load", "%load_ext jupyter_tiers"),
    code("profiles", "%tiers profiles"),
    md("train-md", """
        `--launcher torchrun --nproc-per-node 2` runs one torchrun per node under
        `srun --kill-on-bad-exit=1`; torchrun's c10d rendezvous (on the first node, with the job id
        as rendezvous id) starts 2 workers per node and sets `RANK`, `LOCAL_RANK`, `WORLD_SIZE`,
        `MASTER_ADDR` and `MASTER_PORT`, so `init_process_group` needs no arguments. gloo runs on
        CPUs; on GPU nodes use `nccl` and `--gpus-per-node`. `--env` passes a variable to every
        rank (values never appear in the script or the job registry).

        DDP all-reduces the gradients during `backward()`, so every rank ends with the same
        weights; rank 0 saves the checkpoint into `$JT_CHECKPOINT_DIR`, which every rank gets
        (`{workdir}/{name}/{job_id}/checkpoints` on the cluster's shared storage). When the job
        completes the registry records the newest checkpoint there, the summary line names it, and
        `%%k8s_serve --model-from ddp-demo` can serve it (see `train_then_serve.ipynb`).
        """),
    code("train", magic=(
        "%%slurm_train --profile {profile} --nodes {nodes} --launcher torchrun"
        " --nproc-per-node {nproc_per_node} --time {time} --env OMP_NUM_THREADS=1 --wait --out job"
        " --name {name}"
    ), text='''
        import os

        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        print(f"rank {rank} of {world} on {os.environ.get('SLURMD_NODENAME', '?')}"
              f" (local rank {os.environ['LOCAL_RANK']})")

        torch.manual_seed(0)
        model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)))
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        data = torch.Generator().manual_seed(1000 + rank)  # each rank draws its own shard
        target = torch.linspace(-1, 1, 8).unsqueeze(1)

        for step in range(1, 31):
            x = torch.randn(64, 8, generator=data)
            loss = torch.nn.functional.mse_loss(model(x), x @ target)
            opt.zero_grad()
            loss.backward()  # DDP averages the gradients across all ranks here
            opt.step()
            if step % 10 == 0:
                mean_loss = loss.detach().clone()
                dist.all_reduce(mean_loss)
                if rank == 0:
                    print(f"step {step:3d} mean loss {mean_loss.item() / world:.4f}")

        checksum = sum(p.detach().double().sum().item() for p in model.parameters())
        print(f"rank {rank} weights checksum {checksum:.6f}")
        if rank == 0:
            path = os.path.join(os.environ["JT_CHECKPOINT_DIR"], "checkpoint.pt")
            torch.save({"model": model.module.state_dict(), "step": step}, path)
            print(f"checkpoint saved: {path} ({os.path.getsize(path)} bytes)")
        dist.barrier()
        # DDP holds the process group: let it go first, so that the group (and gloo's threads) ends
        # here and not while Python shuts down, where a rank can abort after its work is done.
        del model, opt
        dist.destroy_process_group()
        '''),
    md("after-md", """
        The cell kept the job handle in `job` (`--out job`). Its status has one entry per rank,
        with the node it ran on; `job.logs(rank=0)` is one rank's output without prefixes.
        """),
    code("ranks", """
        status = job.status()
        print(status.state.value, "on", status.nodelist)
        for r in status.ranks:
            print(f"rank {r.rank}: {r.phase.value} on {r.node}, exit {r.exit_code}")
        print("newest checkpoint:", status.checkpoint)
        """),
    code("logs", "%tiers logs {job.id} --rank 0 --tail 2"),
]

TEACHING_LAB: list[Cell] = [
    md("intro", """
        # Teaching lab: what a scheduler does for distributed training

        These exercises run on the cluster in a box: `jupyter tiers sandbox up --nodes 4` starts a
        real Slurm cluster on this machine (4 nodes, two leaf switches `leaf1` = node1-2 and
        `leaf2` = node3-4 under one spine) and writes the `sandbox` profile used below.
        """),
    md("lab-setup-md", """
        **For a class** (the admin, as root, once): `jupyter tiers sandbox up --nodes 4 --lab`
        writes the shared `sandbox` profile into `/etc/jupyter/tiers.yaml`, then
        `jupyter tiers sandbox add-user NAME` for each student's Unix user gives them a Slurm
        association and a key of their own (`~/.ssh/jupyter_tiers_lab`). Each student then runs
        this notebook in their own Jupyter, unchanged: their jobs run as themselves, their job
        directories under `~/jupyter-tiers` are theirs alone, `%tiers jobs` lists only their jobs,
        and another student's job can be neither read nor cancelled.
        """),
    code("parameters", """
        profile = "sandbox"  # the profile `jupyter tiers sandbox up` writes
        nodes = 4  # the cluster's node count: the gang job asks for all of them
        serve_profile = "sandbox-serve"  # a local profile that sees the cluster's storage (below)
        """),
    code("load", """
        %load_ext jupyter_tiers
        %tiers profiles
        """),
    md("gang-md", """
        **Gang allocation**: Slurm starts a job only when all its nodes are free, and then starts
        every rank at once, so no rank waits for a partner that has not been scheduled yet.
        """),
    code("gang", """
        %%slurm_train --profile {profile} --nodes {nodes} --wait --out gang --name gang
        import os, time
        print(f"rank {os.environ['RANK']} on {os.environ['SLURMD_NODENAME']} started at {time.time():.3f}")
        time.sleep(5)
        """),
    code("gang-starts", """
        import re

        starts = {int(rank): (node, float(t)) for rank, node, t in
                  re.findall(r"^(\\d+): rank \\d+ on (\\S+) started at ([\\d.]+)$", gang.logs(), re.M)}
        first = min(t for _, t in starts.values())
        for rank, (node, t) in sorted(starts.items()):
            print(f"rank {rank} on {node}: started +{t - first:.2f} s after the first")
        spread = max(t for _, t in starts.values()) - first
        print(f"gang: {len(starts)} ranks on {len({n for n, _ in starts.values()})} nodes "
              f"({gang.status().nodelist}) started within {spread:.2f} s")
        ranks = gang.status().ranks  # start and end of every rank, from the job's own files
        together = max(r.started_at for r in ranks) < min(r.ended_at for r in ranks)
        print(f"all ranks were running at the same moment: {together}")
        """),
    md("switches-md", """
        **Topology-aware placement**: `--switches 1@00:05:00` asks for nodes under a single leaf
        switch (waiting up to five minutes, Slurm's default limit, for such a set while other jobs
        hold nodes), so the ranks' traffic never crosses the spine; rank 0 looks up its nodes' leaf
        in Slurm's topology.
        """),
    code("switches", """
        %%slurm_train --profile {profile} --nodes 2 --switches 1@00:05:00 --wait --out placed --name placed
        import os, re, subprocess

        def scontrol(*args):
            return subprocess.run(["scontrol", *args], capture_output=True, text=True, check=True).stdout

        if os.environ["RANK"] == "0":
            mine = set(scontrol("show", "hostnames", os.environ["SLURM_JOB_NODELIST"]).split())
            for line in scontrol("show", "topology").splitlines():
                leaf = re.search(r"SwitchName=(\\S+) Level=0 .*Nodes=(\\S+)", line)
                if leaf and mine <= set(scontrol("show", "hostnames", leaf.group(2)).split()):
                    print(f"nodes {','.join(sorted(mine))} are all on leaf switch {leaf.group(1)}")
                    break
            else:
                print(f"nodes {','.join(sorted(mine))} straddle leaf switches")
        """),
    md("pending-md", """
        **Pending reasons**: a job that cannot start yet says why; this one is submitted held
        (`--sbatch --hold`), so Slurm reports `JobHeldUser` until it is released or cancelled.
        """),
    code("held", """
        %%slurm_train --profile {profile} --sbatch --hold --out held --name held
        print("released")
        """),
    code("held-reason", """
        status = held.status()
        print(f"job {held.id} is {status.state.value}, reason: {status.reason}")
        """),
    code("held-cancel", """
        %tiers cancel {held.id}
        print(f"job {held.id} is {held.wait(timeout=120).state.value}")
        """),
    md("fail-md", """
        **Fail-stop**: when one rank exits with an error, `srun --kill-on-bad-exit` stops all the
        others instead of leaving them blocked in a collective; the summary names the rank that
        failed first.
        """),
    code("fail", """
        %%slurm_train --profile {profile} --nodes 2 --ntasks-per-node 2 --wait --out failed --name fail-stop
        import os, sys, time
        rank = int(os.environ["RANK"])
        print(f"rank {rank} working", flush=True)
        if rank == 3:
            # Fail once all four ranks have started (each one's state file, named by its rank,
            # is in ranks/), so there are three running ranks for fail-stop to stop.
            started = os.path.join(os.environ["JT_JOB_DIR"], "ranks")
            for _ in range(600):
                if sum(name.isdigit() for name in os.listdir(started)) == 4:
                    break
                time.sleep(0.2)
            else:
                print("rank 3: not every rank started within 2 minutes", file=sys.stderr)
            print("rank 3: giving up", file=sys.stderr)
            sys.exit(7)
        time.sleep(300)  # without fail-stop these ranks would wait here for 5 minutes
        """),
    code("fail-ranks", """
        from jupyter_tiers.batch.status import describe_rank

        for r in failed.status().ranks:
            print(describe_rank(r))
        """),
    md("tiers-md", """
        ## Training or serving: which tier fits

        A training job and a model server want opposite things from a scheduler. Training wants
        every rank at once and all of them stopped when one fails (the gang and fail-stop above);
        then it ends. A server wants to run forever, one replica restarted when it crashes while
        the others go on answering, behind a stable address. Slurm does the first, Kubernetes the
        second (`%%k8s_serve`; on the local tier its replicas are processes on this machine).
        jupyter-tiers looks at the cell's shape and says so when a cell is on the wrong tier.

        **A training cell on the serving tier is refused**, with the reason (`--force` would serve it
        anyway): two replicas that each call `init_process_group` would wait for each other forever,
        and a restarted replica would never rejoin.
        """),
    code("guard-serve", """
        import torch.distributed as dist

        dist.init_process_group("gloo")  # every replica waits here for the others
        """, magic="%%k8s_serve --profile {serve_profile} --name ddp-as-service --replicas 2", raises=True),
    md("guard-train-md", """
        **A server on the training tier gets a warning** but is submitted: it would hold its node until
        the time limit and have no stable address. Cancel it at once.
        """),
    code("guard-train", """
        import http.server

        http.server.ThreadingHTTPServer(("", 8000), http.server.SimpleHTTPRequestHandler).serve_forever()
        """, magic="%%slurm_train --profile {profile} --time 00:05:00 --out server_job --name server-as-job"),
    code("guard-train-cancel", """
        %tiers cancel {server_job.id}
        print(f"job {server_job.id} is {server_job.wait(timeout=120).state.value}")
        """),
    md("handoff-md", """
        **Train here, serve there.** Every rank of a job gets `$JT_CHECKPOINT_DIR` on the cluster's
        shared storage; when the job completes the registry records the newest checkpoint in it.
        This is the quickstart's model, trained on two nodes of the cluster; rank 0 saves a
        checkpoint every 5 steps.
        """),
    code("fit", linear_training(),
         magic="%%slurm_train --profile {profile} --nodes 2 --wait --out fit --name lab-fit"),
    md("no-storage-md", """
        `%%k8s_serve --model-from fit` serves that checkpoint, but only from a tier that can see it.
        The built-in `local` profile knows nothing of the cluster's disks, so it refuses, naming the
        job and what is missing:
        """),
    code("no-storage", """
        print("never reached")
        """, magic="%%k8s_serve --profile local --name lab-model --model-from fit", raises=True),
    md("serve-md", """
        The cluster in a box keeps its job directories on this machine's disk, so a local profile
        can say where the cluster's paths are here: the same place. The lab's `tiers.yaml` has
        (if yours does not, add it to `~/.jupyter/tiers.yaml`, next to the `sandbox` profile)

        ```yaml
        profiles:
          sandbox-serve:
            tier: local
            path_map: {/root/jupyter-tiers: /root/jupyter-tiers}   # the sandbox profile's workdir
        ```

        (on a real lab the path map names where the cluster's storage is mounted on the Jupyter
        machine; for Kubernetes, see `train_then_serve.ipynb`). Served from it, the model answers at
        one local URL:
        """),
    code("serve", checkpoint_predictor("127.0.0.1"), magic=(
        "%%k8s_serve --profile {serve_profile} --name lab-model --model-from fit --readiness /healthz"
        " --wait --out svc"
    )),
    code("query", query("svc.url")),
    code("delete", "%k8s_serve --profile {serve_profile} --name lab-model --delete"),
]

SERVE_MAGIC = ("%%k8s_serve --profile {profile} --name {name} --image {image} --replicas {replicas}"
               " --port 8000 --readiness /healthz --wait --out svc")


def predictor(w: float, b: float) -> str:
    """The body of the serving cells: a stdlib HTTP server for the linear model y = w*x + b."""
    return f"""
        import http.server
        import json
        import urllib.parse

        W, B = {w}, {b}  # the "model": y = {w:g}x + {b:g}


        class Predict(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # GET /healthz (the readiness probe), GET /predict?x=2
                url = urllib.parse.urlsplit(self.path)
                if url.path == "/healthz":
                    self.reply(200, "ok")
                elif url.path == "/predict":
                    self.predict(urllib.parse.parse_qs(url.query).get("x", ["0"])[0])
                else:
                    self.reply(404, {{"error": f"no route {{url.path}}"}})

            def do_POST(self):  # POST /predict {{"x": 2}}
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.predict(json.loads(body or b"{{}}").get("x", 0))

            def predict(self, x):
                x = float(x)
                y = W * x + B
                print(f"{{self.command}} /predict x={{x}} -> y={{y}}", flush=True)  # one line per request
                self.reply(200, {{"x": x, "y": y}})

            def reply(self, code, body):
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(code)
                kind = "text/plain" if isinstance(body, str) else "application/json"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format, *args):
                pass  # no access log: the probe would fill it; predict() logs what matters


        print("serving y = {w:g}x + {b:g} on port 8000", flush=True)
        http.server.ThreadingHTTPServer(("0.0.0.0", 8000), Predict).serve_forever()
        """


SERVE_K8S: list[Cell] = [
    md("intro", """
        # Serving on Kubernetes: a model endpoint from a notebook cell

        `%%k8s_serve` turns a cell into a Kubernetes service: the cell's body is the server
        program, and the tier applies a ConfigMap holding it, a Deployment that runs it in every
        pod, and a Service in front of the pods (server-side apply, so re-running the cell is an
        update). This notebook needs a `serving` profile in `tiers.yaml`, for example:

        ```yaml
        profiles:
          serving:
            tier: kubernetes
            kubeconfig: ~/.kube/config   # optional: the default loading rules otherwise
            namespace: alice
            defaults: {image: "python:3.11-slim"}
        ```

        Any image with a Python 3 works for this example: the server below uses the standard
        library only. The parameters cell (tagged `parameters`) is what papermill overrides:
        `papermill serve_k8s.ipynb out.ipynb -p profile prod -p replicas 3`.
        """),
    code("parameters", """
        profile = "serving"  # a kubernetes profile of tiers.yaml
        name = "echo"  # the service's name (a DNS-1123 label)
        image = "python:3.11-slim"  # any image with a Python 3
        replicas = 2
        """),
    code("load", "%load_ext jupyter_tiers"),
    code("profiles", "%tiers profiles"),
    md("serve-md", """
        The "model" is a fixed linear function, `y = 3x + 1`, behind a tiny HTTP server:
        `POST /predict` with `{"x": 2}` (or `GET /predict?x=2`) answers `{"x": 2.0, "y": 7.0}`,
        `GET /healthz` answers `ok` and is the readiness probe (`--readiness /healthz`): a pod
        gets traffic only once it answers there. Every prediction is logged with one line.

        `--replicas 2` runs two pods. `--wait` blocks until both are ready (or the rollout fails)
        and prints one summary line with the endpoint inside the cluster and the rollout's
        revision; meanwhile the pods' log lines appear, each prefixed with its pod's name. (In
        JupyterLab a live widget shows the service; without `--wait` the cell returns at once.)
        `--out svc` keeps the `Service` handle in `svc`.
        """),
    code("serve", predictor(3.0, 1.0), magic=SERVE_MAGIC),
    md("query-md", """
        The endpoint `http://echo.<namespace>.svc:8000` is reachable from inside the cluster.
        From the notebook, `svc.port_forward()` opens a local port relayed to a ready pod through
        the Kubernetes API (like `kubectl port-forward`), kept open while the kernel lives.
        """),
    code("query", """
        import json
        import urllib.request

        url = svc.port_forward()  # http://127.0.0.1:PORT


        def predict(x):
            request = urllib.request.Request(f"{url}/predict", data=json.dumps({"x": x}).encode(),
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.read().decode()


        print(predict(2.0))
        """),
    md("jobs-md", """
        `%tiers jobs` lists services beside training jobs: SIZE is ready/desired pods, WHERE the
        endpoint.
        """),
    code("jobs", "%tiers jobs"),
    md("update-md", """
        **A rolling update.** Change the model to `y = 3x + 2` and run the same magic again: the
        new body changes the pod template, so the Deployment rolls to revision 2, one new pod at a
        time, and an old pod is removed only once a new one is ready (no capacity is lost while it
        rolls). Re-running an unchanged cell would change nothing.
        """),
    code("update", predictor(3.0, 2.0), magic=SERVE_MAGIC),
    md("query-again-md", """
        The pods the first port-forward reached are gone; forward again, to a pod of revision 2.
        """),
    code("query-again", """
        url = svc.port_forward()
        print(predict(2.0))
        """),
    md("scale-md", """
        **Scaling** needs no new rollout: `svc.scale(3)` (or `%tiers scale echo 3`) sets the
        Deployment's replicas, and `svc.wait_ready()` blocks until the third pod is ready too.
        """),
    code("scale", """
        svc.scale(3)
        status = svc.wait_ready(timeout=120)
        print(f"service {status.name} {status.state.value} {status.ready}/{status.desired}"
              f" (revision {status.revision})")
        for pod in status.pods:
            print(f"  {pod.name}: {pod.phase}, {'ready' if pod.ready else 'not ready'}")
        """),
    md("logs-md", """
        `%tiers logs echo` merges every pod's log, each line prefixed with its pod's name
        (`--pod NAME` gives one pod's log, `--tail N` the last lines).
        """),
    code("logs", "%tiers logs {name} --tail 5"),
    md("delete-md", """
        **Clean up**: `%k8s_serve --delete` (the line form) removes everything the tier made for
        the service (Deployment, Service, ConfigMap, and the Secret and autoscaler when there are
        any); `svc.delete()` and `%tiers delete echo` do the same. The registry keeps the record,
        now `DELETED`.
        """),
    code("delete", "%k8s_serve --profile {profile} --name {name} --delete"),
    code("jobs-after", "%tiers jobs"),
]

SERVING: list[Cell] = [
    md("intro", """
        # Serving LLMs on Kubernetes: vLLM and TGI cells to adapt

        The cells a user with a GPU cluster writes to serve a fine-tuned model with
        [vLLM](https://docs.vllm.ai) or Hugging Face's text-generation-inference: GPU requests, a
        readiness probe, the weights from a shared volume, a gated model's token from a Secret,
        autoscaling and a blue-green switch.

        As shipped, every cell runs with `--dry-run`: it prints every object it would apply (the
        ConfigMap holding the cell, the Deployment, the Service, and the Secret and autoscaler
        when there are any), and applies nothing. No cluster is needed for that: the profile names
        its namespace, so nothing is asked of the API server. Set `mode = "--wait"` in the
        parameters below (or run `papermill serving.ipynb out.ipynb -p mode --wait`) to apply each
        cell and wait until its pods are ready.

        The profile used, in `tiers.yaml`:

        ```yaml
        profiles:
          serving:
            tier: kubernetes
            namespace: team-llm
            model_volume: {pvc: models}      # mounted read-only at /models in every pod
            defaults: {node_selector: {pool: gpu}}
        ```
        """),
    code("parameters", """
        profile = "serving"  # a kubernetes profile of tiers.yaml
        name = "llama"  # the services are {name}-vllm and {name}-tgi (DNS-1123 labels)
        vllm_image = "vllm/vllm-openai:v0.6.0"
        tgi_image = "ghcr.io/huggingface/text-generation-inference:2.4.0"
        gpus = 1  # GPUs per replica (nvidia.com/gpu)
        replicas = 2
        mode = "--dry-run"  # "--wait": apply each cell on the cluster and wait until it is ready
        """),
    code("load", "%load_ext jupyter_tiers"),
    md("vllm-md", """
        **vLLM, OpenAI-compatible.** `--shell` makes the body a command line. The weights are read
        from `/models` (the profile's `model_volume`); `--gpus` becomes the container's
        `nvidia.com/gpu` limit, so the scheduler places each replica on a node with a free GPU
        (a pod that fits nowhere shows `Insufficient nvidia.com/gpu` in the widget).
        `--readiness /health` sends traffic to a replica only once vLLM has loaded the model, and
        the Service spreads requests over the `--replicas`. CPU and memory are requested and
        limited alike (Guaranteed QoS: the server is the last thing a node evicts).
        """),
    code("vllm", magic=(
        "%%k8s_serve --profile {profile} --name {name}-vllm --image {vllm_image} --gpus {gpus}"
        " --replicas {replicas} --cpu 8 --memory 32Gi --port 8000 --readiness /health --shell {mode}"
    ), text="""
        vllm serve /models/llama-3.1-8b-ft --port 8000 --served-model-name llama \\
          --max-model-len 8192 --gpu-memory-utilization 0.90
        """),
    md("tgi-md", """
        **Text-generation-inference** serves the same weights the same way; only the image and the
        command line change. A gated model pulled from the Hub instead needs a token: keep it in a
        Secret of the namespace (`kubectl create secret generic hf-token --from-literal=token=...`)
        and name it with `--secret-env`; the token never passes through the notebook. (A value
        that exists only in the kernel's environment goes with `--env HF_TOKEN`, into a Secret the
        tier manages; dry-run shows it only as a comment naming its keys.)
        """),
    code("tgi", magic=(
        "%%k8s_serve --profile {profile} --name {name}-tgi --image {tgi_image} --gpus {gpus}"
        " --replicas 1 --cpu 8 --memory 32Gi --port 8080 --readiness /health"
        " --secret-env HF_TOKEN=hf-token/token --shell {mode}"
    ), text="""
        text-generation-launcher --model-id /models/llama-3.1-8b-ft --port 8080 \\
          --max-input-tokens 4096 --max-total-tokens 8192
        """),
    md("autoscale-md", """
        **Autoscaling.** `--autoscale MIN:MAX:CPU%` adds an autoscaling/v2 HorizontalPodAutoscaler
        and leaves the Deployment's replica count to it (the Deployment then carries no
        `replicas`, so re-running the cell never fights the autoscaler). CPU is a poor signal
        for a GPU-bound server, though: with a metrics adapter (such as prometheus-adapter)
        exposing vLLM's queue length as a pods metric, `--patch` replaces the HPA's metrics with
        it. A patch is a JSON merge patch per kind, over the generated objects: maps merge, lists
        replace; the names and labels the tier uses to find its objects cannot be patched.
        """),
    code("autoscale-patch", """
        queue_metric = {"HorizontalPodAutoscaler": {"spec": {"metrics": [{
            "type": "Pods",
            "pods": {
                "metric": {"name": "vllm_num_requests_waiting"},
                "target": {"type": "AverageValue", "averageValue": "5"},  # queued requests per pod
            },
        }]}}}
        """),
    code("autoscale", magic=(
        "%%k8s_serve --profile {profile} --name {name}-vllm --image {vllm_image} --gpus {gpus}"
        " --autoscale 1:4:80 --patch queue_metric --cpu 8 --memory 32Gi --port 8000"
        " --readiness /health --shell {mode}"
    ), text="""
        vllm serve /models/llama-3.1-8b-ft --port 8000 --served-model-name llama \\
          --max-model-len 8192 --gpu-memory-utilization 0.90
        """),
    md("bluegreen-md", """
        **Blue-green.** A rolling update replaces pods one at a time, so for a while both models
        answer. With `--strategy bluegreen` a new version runs as a second Deployment
        (`{name}-vllm-green` beside `{name}-vllm-blue`) and the Service's selector moves to it only
        once all its replicas are ready; then the old colour is removed. Clients never see two
        versions at once, at the price of twice the GPUs during the switch. The first apply (and
        so the dry run) is blue.
        """),
    code("bluegreen", magic=(
        "%%k8s_serve --profile {profile} --name {name}-vllm --image {vllm_image} --gpus {gpus}"
        " --replicas {replicas} --strategy bluegreen --cpu 8 --memory 32Gi --port 8000"
        " --readiness /health --shell {mode}"
    ), text="""
        vllm serve /models/llama-3.1-8b-ft-v2 --port 8000 --served-model-name llama \\
          --max-model-len 8192 --gpu-memory-utilization 0.90
        """),
    md("after-md", """
        **On a real cluster** (`mode = "--wait"`), each cell prints its pods' logs and one summary
        line, `service llama-vllm READY 2/2 in 00:03:10 — http://llama-vllm.team-llm.svc:8000
        (revision 1)`; without `--wait` it returns at once with the live widget. Then:

        ```python
        svc = connect("serving").attach("llama-vllm")
        url = svc.port_forward()       # http://127.0.0.1:PORT, relayed to a ready pod
        # POST {url}/v1/chat/completions with {"model": "llama", "messages": [...]}
        ```

        `%tiers jobs` lists the services, `%tiers logs llama-vllm --tail 20` merges their pods'
        logs, and `%k8s_serve --profile serving --name llama-vllm --delete` (and `llama-tgi`)
        removes everything the tier made.

        **Serving what a training job just wrote**: add `--model-from JOB` (a job id, name or
        `--out` variable of `%%slurm_train`) and write `vllm serve {model_path} ...`; the tier
        maps the job's newest checkpoint through the profile's `model_volume.path_map` to where
        the pods see it (`train_then_serve.ipynb` does this end to end).
        """),
]

NOTEBOOKS = {
    "quickstart.ipynb": QUICKSTART,
    "ddp_slurm.ipynb": DDP_SLURM,
    "teaching_lab.ipynb": TEACHING_LAB,
    "serve_k8s.ipynb": SERVE_K8S,
    "serving.ipynb": SERVING,
    "train_then_serve.ipynb": TRAIN_THEN_SERVE,
}


def build(cells: list[Cell]) -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    for kind, tag, source in cells:
        make = new_markdown_cell if kind == "md" else new_code_cell
        tags = [tag, "raises-exception"] if kind == "code-raises" else [tag]
        cell = make(source, id=tag, metadata={"tags": tags})
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def render(cells: list[Cell]) -> str:
    return nbformat.writes(build(cells)) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name, cells in NOTEBOOKS.items():
        path = HERE / name
        text = render(cells)
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print("out of date (run examples/make_notebooks.py):", ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
