"""Helpers shared by the benchmarks: the test cluster's profile and a tier on it."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLUSTER_DIR = Path(os.environ.get("JT_CLUSTER_DIR", "/var/lib/jupyter-tiers-cluster"))
CLUSTER_SH = ROOT / "jupyter_tiers" / "tools" / "sandbox" / "cluster.sh"


def cluster_env() -> dict[str, str]:
    path = CLUSTER_DIR / "cluster.env"
    if not path.exists():
        sys.exit(f"the test cluster is not up ({path} missing): run `bash {CLUSTER_SH} up` first")
    from jupyter_tiers.tools.sandbox import read_cluster_env

    return read_cluster_env(path)


def cluster(*args: str) -> None:
    subprocess.run(["bash", str(CLUSTER_SH), *args], check=True, capture_output=True, text=True)


def box_tier(**settings: object):  # -> SlurmTier
    """A SlurmTier on the test cluster with a throwaway registry."""
    from jupyter_tiers.config.profiles import merge_layers, validate_profile
    from jupyter_tiers.config.registry import Registry
    from jupyter_tiers.slurm.tier import SlurmTier

    env = cluster_env()
    raw = {
        "tier": "slurm",
        "host": env["JT_SSH_HOST"],
        "port": int(env["JT_SSH_PORT"]),
        "user": env["JT_SSH_USER"],
        "identity_file": env["JT_SSH_KEY"],
        "known_hosts": env["JT_KNOWN_HOSTS"],
        "workdir": "/var/lib/jupyter-tiers-jobs/bench",
        "defaults": {"time": "00:30:00"},
        **settings,
    }
    cfg = merge_layers([("bench", {"profiles": {"box": validate_profile("box", raw, "bench")}})])
    tmp = tempfile.mkdtemp(prefix="jt-bench-")
    return SlurmTier(cfg.profile("box"), Registry(Path(tmp) / "registry.sqlite"))


def slurm(*argv: str) -> str:
    env = {**os.environ, "SLURM_CONF": cluster_env()["SLURM_CONF"]}
    return subprocess.run(list(argv), check=True, capture_output=True, text=True, env=env).stdout
