"""``jupyter tiers ...`` (also ``jupyter-tiers``): sandbox cluster and job commands."""

from __future__ import annotations

import sys

from ..config.profiles import ConfigError
from ..core.errors import TiersError
from ..core.plaintext import printable
from ..tools.sandbox import main as sandbox_main

USAGE = """usage: jupyter tiers COMMAND

  sandbox up|down|status [--nodes N] [--cpus C]   a multi-node Slurm on this machine (root, Debian/Ubuntu)
  sandbox up --lab | add-user NAME | remove-user NAME
                                                   a teaching lab: each student submits as themselves
  sandbox up --lab --hub [--cull-timeout S] | down --hub | add-user --students FILE [--create]
                                                   the class's JupyterHub (PAM, idle culler) and its students
  jobs [--profile P] [--limit N] [--kind K]        jobs and services of every tier, newest first
  logs ID [--rank N | --pod P] [--tail N]          print a job's or a service's log
  stacks ID [--timeout S]                          every running rank's Python stack, grouped
  cancel ID                                        cancel a job
  delete ID                                        delete a service and everything it made
  scale ID N | restart ID                          scale a service / roll its pods
  rollback ID [--to REVISION]                      roll a Kubernetes service back (default: one revision)
  attach ID [--wait]                               follow a job or service as text
  profiles                                         list the configured profiles
  login [--profile P]                              connect a Slurm profile (asks a login node's one-time code)
  doctor [PROFILE...] [--json] [--suggest-role] [--compute]
                                                   check profiles: reach, host key, login, Slurm/Kubernetes
                                                   access, workdir, Python (read-only; exit 1 on any FAIL)
  init [--name N] [--tier slurm|kubernetes|local] [--host H] [--user U] [--port P] [--workdir W]
       [--partition P] [--context C] [--namespace NS] [--config PATH] [--yes] [--force] [--dry-run]
                                                   write a profile into ~/.jupyter/tiers.yaml from
                                                   ~/.ssh/config, known_hosts and the kubeconfig; asks
                                                   only what they do not say, runs the doctor on it
  history [-p P] [--days N] [--user U|all] [--state S] [--limit N] [--job ID [--tail N]]
                                                   jobs from Slurm accounting, any submitter (--job: one
                                                   job, with its output's last lines when readable)
"""


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE, end="")
        return 0
    # `--help` and `sandbox` answer without loading the tier API.
    if args[0] == "sandbox":
        return sandbox_main(args[1:])
    # lazy: the tier API (~90 modules) loads only for a command that uses it
    from . import tiers_command

    if args[0] == "attach" and "--text" not in args:
        args.append("--text")
    try:
        status = tiers_command.run(args)
    except tiers_command.CommandUsage as exc:
        print(str(exc).replace("%tiers", "jupyter tiers"), file=sys.stderr)
        return 2
    except (ConfigError, TiersError) as exc:
        print(printable(f"jupyter tiers: {exc}", keep="\n"), file=sys.stderr)
        return 1
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    sys.exit(main())
