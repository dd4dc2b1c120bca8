"""The cluster in a box: a real multi-node Slurm (with topology and accounting) on one machine.

``jupyter tiers sandbox up|down|status [--nodes N] [--cpus C]`` runs ``cluster.sh`` next to this
file and, after ``up``, writes a ready ``sandbox`` profile into ``~/.jupyter/tiers.yaml`` (with
``--lab``: the shared students' profile into ``/etc/jupyter/tiers.yaml``). ``sandbox add-user NAME
[--allow-shared-group]`` and ``remove-user NAME`` make a Unix user a lab student or not (lab.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import lab  # its functions looked up at call time (tests patch lab.*)

SCRIPT = Path(__file__).with_name("cluster.sh")
PROFILE_NAME = "sandbox"


def cluster_dir() -> Path:
    return Path(os.environ.get("JT_CLUSTER_DIR", "/var/lib/jupyter-tiers-cluster"))


def run_script(args: list[str]) -> int:
    """Run cluster.sh with ``args``, its output going straight to the terminal."""
    env = {**os.environ, "JT_PROG_NAME": "jupyter tiers sandbox"}
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, check=False).returncode


def read_cluster_env(path: Path | None = None) -> dict[str, str]:
    path = path or cluster_dir() / "cluster.env"
    out = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def sandbox_profile(env: dict[str, str]) -> dict[str, Any]:
    """The profile that reaches the sandbox over its loopback sshd, with this Python on the nodes."""
    profile: dict[str, Any] = {
        "tier": "slurm",
        "description": "cluster in a box on this machine (jupyter tiers sandbox)",
        "host": env["JT_SSH_HOST"],
        "port": int(env["JT_SSH_PORT"]),
        "user": env["JT_SSH_USER"],
        "identity_file": env["JT_SSH_KEY"],
        "known_hosts": env["JT_KNOWN_HOSTS"],
        "workdir": "~/jupyter-tiers",
        "defaults": {"partition": "debug", "time": "00:30:00", "python": sys.executable},
    }
    if sys.prefix != sys.base_prefix:  # a venv: put its tools (torchrun) on the nodes' PATH
        profile["setup"] = lab.venv_setup(sys.prefix)
    return profile


def write_profile(path: Path, profile: dict[str, Any], name: str = PROFILE_NAME) -> bool:
    """Add or replace one profile in a tiers.yaml, keeping the others; returns True if changed.

    The previous file is kept as ``tiers.yaml.bak`` (YAML comments are not preserved).
    """
    import yaml

    data: dict[str, Any] = {}
    if path.exists():
        data = yaml.safe_load(path.read_text()) or {}
    profiles = data.setdefault("profiles", {})
    if profiles.get(name) == profile:
        return False
    if path.exists():
        path.with_name(path.name + ".bak").write_text(path.read_text())
    profiles[name] = profile
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return True


def main(argv: list[str]) -> int:
    """``sandbox up|down|status [--nodes N] [--cpus C] [--lab]``, ``sandbox add-user NAME
    [--allow-shared-group]``, ``sandbox remove-user NAME``."""
    import argparse

    parser = argparse.ArgumentParser(prog="jupyter tiers sandbox",
                                     description="A multi-node Slurm cluster on this machine.")
    parser.add_argument("action", choices=["up", "down", "status", "add-user", "remove-user"])
    parser.add_argument("name", nargs="?", help="add-user/remove-user: an existing Unix user")
    parser.add_argument("--lab", action="store_true",
                        help="up: write the students' shared profile into /etc/jupyter/tiers.yaml")
    parser.add_argument("--nodes", type=int, help="number of nodes (default 4)")
    parser.add_argument("--cpus", type=int, help="CPUs per node (default 8)")
    parser.add_argument("--allow-shared-group", action="store_true",
                        help="add-user: accept a user whose primary group others share (they could "
                             "read the user's checkpoints, which are group-readable)")
    parser.add_argument("--config", type=Path, default=Path("~/.jupyter/tiers.yaml").expanduser(),
                        help="tiers.yaml to write the 'sandbox' profile into")
    args = parser.parse_args(argv)
    if args.action in ("add-user", "remove-user"):
        return _lab_command(parser, args)
    if args.name is not None:
        parser.error(f"'{args.action}' takes no user name (only add-user and remove-user do)")
    if args.lab and args.action != "up":
        parser.error("--lab only goes with 'up'")
    if args.allow_shared_group:
        parser.error("--allow-shared-group only goes with 'add-user'")
    script_args = [args.action]
    if args.action == "up":
        if args.nodes:
            script_args += ["--nodes", str(args.nodes)]
        if args.cpus:
            script_args += ["--cpus", str(args.cpus)]
    elif args.nodes or args.cpus:
        parser.error("--nodes and --cpus only go with 'up'")
    code = run_script(script_args)
    if code == 0 and args.action == "up" and args.lab:
        try:
            changed, note = lab.write_lab_config(lab.load_cluster())
        except (lab.LabError, OSError) as exc:
            print(f"jupyter tiers sandbox: cannot write the lab profile: {exc}", file=sys.stderr)
            return 1
        print(f"{'wrote' if changed else 'kept'} the lab profile '{PROFILE_NAME}' in /etc/jupyter/tiers.yaml"
              + (f" ({note})" if note else "")
              + "; add each student with: jupyter tiers sandbox add-user NAME")
    if code == 0 and args.action == "up":  # the admin's own profile (root's key) in every case
        changed = write_profile(args.config, sandbox_profile(read_cluster_env()))
        verb = "wrote" if changed else "kept"
        print(f"{verb} profile '{PROFILE_NAME}' in {args.config}: "
              f"use %%slurm_train --profile {PROFILE_NAME}")
    return code


def _lab_command(parser: Any, args: Any) -> int:
    if args.name is None:
        parser.error(f"{args.action} needs a user name: jupyter tiers sandbox {args.action} NAME")
    if args.nodes or args.cpus or args.lab:
        parser.error(f"{args.action} takes only a user name"
                     + (" (and --allow-shared-group)" if args.action == "add-user" else ""))
    if args.allow_shared_group and args.action != "add-user":
        parser.error("--allow-shared-group only goes with 'add-user'")
    try:
        if args.action == "add-user":
            lab.add_user(args.name, allow_shared_group=args.allow_shared_group)
        else:
            lab.remove_user(args.name)
    except lab.LabError as exc:
        print(f"jupyter tiers sandbox {args.action}: {exc}", file=sys.stderr)
        return 1
    return 0
