"""The cluster in a box: a real multi-node Slurm (with topology and accounting) on one machine.

``jupyter tiers sandbox up|down|status [--nodes N] [--cpus C]`` runs ``cluster.sh`` next to this
file and, after ``up``, writes a ready ``sandbox`` profile into ``~/.jupyter/tiers.yaml`` (with
``--lab``: the shared students' profile into ``/etc/jupyter/tiers.yaml``; with ``--lab --hub``
also the class's JupyterHub, hub.py). ``sandbox add-user NAME [--allow-shared-group]
[--initial-password] [--create [--existing NAME]...]`` (or ``--students FILE``, students.py) and
``remove-user NAME`` make a Unix user a lab student or not (lab.py). ``sandbox down --hub``
stops the hub alone; ``sandbox down`` stops the hub, then the cluster.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import hub, lab, students  # their functions looked up at call time (tests patch lab.*)
from .files import PROFILE_NAME, cluster_dir, read_cluster_env, write_profile

__all__ = ["PROFILE_NAME", "cluster_dir", "main", "read_cluster_env", "sandbox_profile", "write_profile"]

SCRIPT = Path(__file__).with_name("cluster.sh")


def run_script(args: list[str]) -> int:
    """Run cluster.sh with ``args``, its output going straight to the terminal."""
    env = {**os.environ, "JT_PROG_NAME": "jupyter tiers sandbox"}
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, check=False).returncode


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


def main(argv: list[str]) -> int:
    """``sandbox up|down|status [--nodes N] [--cpus C] [--lab [--hub ...]]``, ``sandbox down
    --hub``, ``sandbox add-user NAME|--students FILE [--allow-shared-group] [--initial-password]
    [--create [--existing NAME]...]``, ``sandbox remove-user NAME``."""
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
    parser.add_argument("--hub", action="store_true",
                        help="up (with --lab): start the class's JupyterHub; down: stop only the hub")
    parser.add_argument("--hub-ip", default="127.0.0.1",
                        help="up --hub: the address the hub listens on (default 127.0.0.1; put a TLS "
                             "proxy in front before opening it to a network)")
    parser.add_argument("--hub-port", type=int, default=hub.DEFAULT_PORT,
                        help=f"up --hub: the hub's port (default {hub.DEFAULT_PORT})")
    parser.add_argument("--cull-timeout", default=str(hub.CULL_TIMEOUT),
                        help=f"up --hub: stop a student's server idle this many seconds "
                             f"(default {hub.CULL_TIMEOUT})")
    parser.add_argument("--students", type=Path,
                        help="add-user: a file of students, one login name a line (NAME or NAME:PASSWORD)")
    parser.add_argument("--initial-password", action="store_true",
                        help="add-user: give each student without a password in the file a new one "
                             "(printed once, for you to hand out)")
    parser.add_argument("--create", action="store_true",
                        help="add-user: create a missing Unix user (home, a group of their own, a "
                             "printed initial password)")
    parser.add_argument("--existing", action="append", default=[], metavar="NAME",
                        help="add-user --create: also take this existing account (the student's own; "
                             "repeatable); never root, a system account or an administrator")
    parser.add_argument("--config", type=Path, default=Path("~/.jupyter/tiers.yaml").expanduser(),
                        help="tiers.yaml to write the 'sandbox' profile into")
    args = parser.parse_args(argv)
    hub_given = args.hub_ip != "127.0.0.1" or args.hub_port != hub.DEFAULT_PORT \
        or args.cull_timeout != str(hub.CULL_TIMEOUT)
    if args.action in ("add-user", "remove-user"):
        if args.hub or hub_given:
            parser.error("--hub, --hub-ip, --hub-port and --cull-timeout go with 'up' "
                         "(and --hub with 'down')")
        return _lab_command(parser, args)
    if args.students or args.initial_password or args.create or args.existing:
        parser.error("--students, --initial-password, --create and --existing only go with 'add-user'")
    if args.hub and args.action == "up" and not args.lab:
        parser.error("--hub goes with --lab: jupyter tiers sandbox up --lab --hub")
    if args.hub and args.action == "status":
        parser.error("'status' shows the hub without --hub")
    if hub_given and not (args.hub and args.action == "up"):
        parser.error("--hub-ip, --hub-port and --cull-timeout only go with 'up --lab --hub'")
    if args.hub and args.action == "up":
        try:
            cull_timeout = hub.check_cull_timeout(args.cull_timeout)
        except lab.LabError as exc:
            parser.error(str(exc))
        if not 1 <= args.hub_port <= 65535:
            parser.error(f"--hub-port must be 1 to 65535, not {args.hub_port}")
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
    if args.action == "down":  # the hub first: its students' servers use the cluster
        try:
            hub.stop()
        except OSError as exc:
            print(f"jupyter tiers sandbox down: cannot stop the hub: {exc}", file=sys.stderr)
            return 1
        if args.hub:
            return 0
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
    if code == 0 and args.action == "up" and args.hub:
        try:
            hub.start(ip=args.hub_ip, port=args.hub_port, cull_timeout=cull_timeout)
        except (lab.LabError, OSError) as exc:
            print(f"jupyter tiers sandbox: cannot start the hub: {exc}", file=sys.stderr)
            return 1
    if args.action == "status":
        print(hub.status_text(), end="")
    return code


def _lab_command(parser: Any, args: Any) -> int:
    if (args.name is None) == (args.students is None or args.action != "add-user"):
        parser.error(f"{args.action} needs a user name: jupyter tiers sandbox {args.action} NAME"
                     + (" (or --students FILE, not both)" if args.action == "add-user" else ""))
    if args.nodes or args.cpus or args.lab:
        parser.error(f"{args.action} takes only a user name"
                     + (" (and --allow-shared-group)" if args.action == "add-user" else ""))
    if args.action != "add-user" and args.allow_shared_group:
        parser.error("--allow-shared-group only goes with 'add-user'")
    if args.action != "add-user" and (args.initial_password or args.create or args.students
                                      or args.existing):
        parser.error("--students, --initial-password, --create and --existing only go with 'add-user'")
    if args.existing and not args.create:
        parser.error("--existing goes with --create (without --create, add-user takes existing "
                     "accounts only)")
    try:
        if args.action == "add-user":
            todo = (students.read_students(args.students) if args.students is not None
                    else [students.Student(lab.check_user_name(args.name))])
            existing = [lab.check_user_name(name) for name in args.existing]
            students.add_students(todo, initial_password=args.initial_password,
                                  allow_shared_group=args.allow_shared_group, create=args.create,
                                  existing=existing)
        else:
            lab.remove_user(args.name)
            if students.leave_students_group(args.name):
                print(f"{args.name}: no longer in group {students.STUDENTS_GROUP} "
                      "(cannot log in to the hub)")
    except lab.LabError as exc:
        print(f"jupyter tiers sandbox {args.action}: {exc}", file=sys.stderr)
        return 1
    return 0
