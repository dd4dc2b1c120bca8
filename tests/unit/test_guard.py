"""The routing guard (guard.py): training shapes refused by %%k8s_serve, server shapes warned
about by %%slurm_train, and a seeded fuzz that it never raises on arbitrary text."""

from __future__ import annotations

import random

import pytest

from jupyter_tiers.spec import guard

TRAINING = [
    ("import torch.distributed as dist\ndist.init_process_group('nccl')\n", False,
     "calls init_process_group (line 2)"),
    ("from torch.distributed import init_process_group as ipg\n"
     "import torch.distributed as d\nd.init_process_group()\n", False, "calls init_process_group (line 3)"),
    ("import subprocess\nsubprocess.run(['torchrun', '--nproc-per-node=2', 'train.py'])\n", False,
     "runs torchrun (line 2)"),
    ("import runpy\nrunpy.run_module('torch.distributed.run')\n", False,
     "runs torch.distributed.run (line 2)"),
    ("from torch.distributed.run import main\nmain()\n", False, "imports torch.distributed.run (line 1)"),
    ("# serve\ntorchrun --nnodes 2 train.py\n", True, "runs torchrun (line 2)"),
    ("exec /opt/venv/bin/torchrun train.py", True, "runs torchrun (line 1)"),
    ("python -m torch.distributed.run train.py", True, "runs python -m torch.distributed.run (line 1)"),
    ("def broken(:\n    dist.init_process_group('gloo')\n", False, "calls init_process_group (line 2)"),
]

SERVING = [
    "import http.server\nhttp.server.ThreadingHTTPServer(('', 8000), H).serve_forever()\n",
    "vllm serve /models/x --port 8000",
    "# torchrun is for training\nimport os\nprint('torchrun')\n",  # a word in a string or comment
    "import torch\nmodel = torch.load('/models/m.pt')\n",
]

SERVERS = [
    ("import http.server\nhttp.server.HTTPServer(('', 8000), H).serve_forever()\n", False,
     "calls serve_forever (line 2)"),
    ("import uvicorn\nuvicorn.run(app, port=8000)\n", False, "calls uvicorn.run (line 2)"),
    ("from flask import Flask\napp = Flask(__name__)\napp.run(port=5000)\n", False, "calls app.run (line 3)"),
    ("import socket\ns = socket.socket()\ns.bind(('', 9000))\ns.listen()\n", False,
     "binds a port and listens (line 3)"),
    ("import os\nos.system('python -m http.server 8000')\n", False, "runs python -m http.server (line 2)"),
    ("python3 -m http.server 8000", True, "runs python -m http.server (line 1)"),
    ("set -e\nvllm serve /models/x --port 8000\n", True, "runs vllm serve (line 2)"),
    ("gunicorn app:app -b 0.0.0.0:8000", True, "runs gunicorn (line 1)"),
    ("def broken(:\n    uvicorn.run(app)\n", False, "calls uvicorn.run (line 2)"),
]

TRAINERS = [
    "import torch.distributed as dist\ndist.init_process_group('gloo')\nprint('step')\n",
    "import socket\ns = socket.socket()\ns.bind(('', 0))\nport = s.getsockname()[1]\n",  # no listen
    "python train.py --epochs 3",
]


@pytest.mark.parametrize(("body", "shell", "where"), TRAINING)
def test_serve_refuses_training_shapes_citing_slurm(body: str, shell: bool, where: str) -> None:
    message = guard.serve_refusal(body, shell=shell)
    assert message is not None and "\n" not in message
    assert f"this cell {where}" in message
    assert "%%slurm_train" in message and "fails" in message and "--force" in message


def test_serve_refuses_gpu_replicas_meeting_at_a_rendezvous_only_with_all_three() -> None:
    body = "import os\naddr = os.environ['MASTER_ADDR']\n"
    message = guard.serve_refusal(body, replicas=4, gpus=8)
    assert message is not None
    assert "runs 4 GPU replicas that meet at a rendezvous (MASTER_ADDR) (line 2)" in message
    assert guard.serve_refusal(body, replicas=1, gpus=8) is None
    assert guard.serve_refusal(body, replicas=4, gpus=0) is None
    assert guard.serve_refusal("print('hi')\n", replicas=4, gpus=8) is None


@pytest.mark.parametrize("body", SERVING)
def test_serve_accepts_serving_bodies(body: str) -> None:
    assert guard.serve_refusal(body, shell=body.startswith("vllm")) is None


@pytest.mark.parametrize(("body", "shell", "where"), SERVERS)
def test_train_warns_about_servers_citing_kubernetes(body: str, shell: bool, where: str) -> None:
    message = guard.train_warning(body, shell=shell)
    assert message is not None and "\n" not in message
    assert f"this cell {where}" in message
    assert "%%k8s_serve" in message and "rolling updates" in message and "--force" in message


@pytest.mark.parametrize("body", TRAINERS)
def test_train_accepts_training_bodies(body: str) -> None:
    assert guard.train_warning(body, shell=body.startswith("python ")) is None


def test_fuzz_the_guard_never_raises() -> None:
    rng = random.Random(20261202)
    pieces = ["init_process_group(", "serve_forever()", "torchrun ", "-m ", "http.server", "uvicorn.run(",
              "app.run(", ".bind((", ".listen()", "MASTER_ADDR", "def f(:", "'", '"', "\n", "#", " ",
              "(", ")",
              "\\", "\x00", "é", "import torch.distributed.run", "vllm serve", "\t", "{", "}", "lambda:",
              "[" * 50, "(" * 200]
    seen = {"refused": 0, "warned": 0}
    for _ in range(3000):
        body = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 25)))
        shell = rng.random() < 0.5
        refusal = guard.serve_refusal(body, shell=shell, replicas=rng.randrange(0, 4),
                                      gpus=rng.randrange(0, 2))
        warning = guard.train_warning(body, shell=shell)
        for message in (refusal, warning):
            assert message is None or (isinstance(message, str) and "\n" not in message)
        seen["refused"] += refusal is not None
        seen["warned"] += warning is not None
    assert seen["refused"] > 100 and seen["warned"] > 100, seen
