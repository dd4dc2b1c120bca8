"""Pure judgement of a Slurm profile's probes (:mod:`.slurm_probe`) as doctor checks, in order:
route, DNS, TCP, host key, authentication methods, login, Slurm tools, accounting, partitions,
GPUs, topology, workdir, setup and Python."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from . import slurm_parse as sp
from .model import Check, fail, ok, skip, warn
from .slurm_probe import LoginProbe, ReachProbe, RemoteProbe, SlurmProbe

SCHEDULER_TOOLS = ("sbatch", "squeue", "sacct", "scontrol")  # what the tier runs on the login node
JOB_TOOLS = ("srun", "scontrol")  # what the job script runs, after the profile's setup
LOW_KIB = 1024 * 1024  # below 1 GiB free: a warning
FULL_KIB = 64 * 1024  # below 64 MiB free: a job's files and logs will not fit

REMOTE_CHECKS = ("slurm tools", "accounting", "partitions", "gpus", "topology", "workdir",
                 "setup and python")
LOGIN_CHECKS = ("host key", "auth methods", "login")


def _skipped(names: tuple[str, ...], why: str) -> list[Check]:
    return [skip(name, why) for name in names]


def reach_checks(reach: ReachProbe, via: str) -> list[Check]:
    where = f"{reach.host}:{reach.port}"
    if reach.proxy_command:
        return [ok("dns", f"{reach.host}: reached through a ProxyCommand"),
                ok("tcp", "through the ProxyCommand (checked by the login)")]
    if reach.dns_error:
        return [fail("dns", f"cannot resolve {reach.host!r}: {reach.dns_error}",
                     f"check the profile's host (or the HostName of its ~/.ssh/config entry){via}")]
    checks = [ok("dns", f"{reach.host} is {', '.join(reach.addresses[:3])}")]
    if reach.tcp_error:
        checks.append(fail("tcp", reach.tcp_error,
                           f"check that {where} is the SSH port and reachable from here "
                           "(a VPN? a firewall?), or set proxy_jump to a host that can reach it"))
    else:
        checks.append(ok("tcp", f"{where} answers{via}"))
    return checks


def host_key_check(login: LoginProbe, route_hops: tuple[Any, ...]) -> Check:
    key = login.host_key
    if not key:
        return ok("host key", "known (" + ", ".join(f"{h[1]}:{h[2]}" for h in route_hops) + ")")
    host, port = str(key["host"]), int(key["port"])
    hop = next((h for h in route_hops if h[1] == host and h[2] == port), None)
    user = hop[3] if hop else "USER"
    add_to = hop[5] if hop else "~/.ssh/known_hosts"
    shown = f"{key['key_type']} {key['fingerprint']}"
    if key.get("changed") or key.get("revoked"):
        return fail("host key", login.host_key_message,
                    "do not connect until the cluster's admins confirm the key; never remove the "
                    "old entry on a guess", **key)
    port_opt = f"-p {port} " if port != 22 else ""
    scan = f"ssh-keyscan {port_opt}{shlex.quote(host)}"
    ssh = f"ssh {port_opt}{shlex.quote(f'{user}@{host}')}"
    return fail("host key",
                f"the server offered {shown}, which is in none of "
                f"{', '.join(key.get('known_hosts') or [add_to])}",
                f"confirm that fingerprint out of band (the cluster's documentation or admins; "
                f"`{scan} | ssh-keygen -lf -` or `{ssh}` show it), then add the key to {add_to}; "
                "the doctor never adds it", add_to=add_to, **key)


def auth_checks(login: LoginProbe) -> list[Check]:
    checks: list[Check] = []
    for hop, methods in login.methods.items():
        if not methods:
            checks.append(warn("auth methods", f"{hop}: did not say which methods it accepts"))
            continue
        words = {"publickey": "key", "keyboard-interactive": "keyboard-interactive (codes/2FA)",
                 "password": "password", "gssapi-with-mic": "Kerberos", "none": "none"}
        shown = ", ".join(words.get(m, m) for m in methods)
        agent = f"; ssh-agent holds {login.agent_keys} key(s)" if login.agent_keys else ""
        if "publickey" not in methods and "none" not in methods:
            checks.append(fail("auth methods", f"{hop} offers {shown}: no public-key login",
                               "jupyter-tiers logs in with a key (plus a one-time code where "
                               "asked); ask the admins whether keys are allowed, or use a jump "
                               "host that accepts them"))
        else:
            checks.append(ok("auth methods", f"{hop} offers {shown}{agent}", methods=list(methods)))
    if not checks:
        checks.append(skip("auth methods", "the connection ended before authentication"))
    return checks


def login_check(login: LoginProbe, profile: str) -> Check:
    if login.logged_in:
        return ok("login", "logged in with a key")
    if login.auth_error and "keyboard-interactive" in login.auth_error and login.reused:
        return ok("login", "the key was accepted; the host then asks a one-time code (2FA): the "
                  "checks below used this kernel's connection from %tiers login")
    if login.auth_error and "keyboard-interactive" in login.auth_error:
        return warn("login", "the key was accepted; the host then asks a one-time code (2FA), "
                    "which the doctor does not ask",
                    f"in a notebook, run `%tiers login -p {profile}` (it asks the code once), then "
                    "`%tiers doctor` again: the checks on the login node use that connection")
    if login.auth_error:
        return fail("login", login.auth_error,
                    "set identity_file to a key the cluster knows (its public half in "
                    "~/.ssh/authorized_keys there), or load it into ssh-agent (ssh-add)")
    return fail("login", login.connect_error or "no connection",
                "check the host, port and proxy_jump; run `ssh -v` with the same settings to see "
                "where it stops")


def tools_check(login_tools: Mapping[str, sp.Tool], setup: sp.Setup, has_setup: bool) -> Check:
    missing = [t for t in SCHEDULER_TOOLS if not (login_tools.get(t) and login_tools[t].path)]
    after = [t for t in JOB_TOOLS if not (setup.tools.get(t) and setup.tools[t].path)]
    versions = sorted({t.version for t in login_tools.values() if t.path and t.version})
    data = {"tools": {n: {"path": t.path, "version": t.version} for n, t in login_tools.items()}}
    if missing:
        return fail("slurm tools", f"{', '.join(missing)} not found on the login node's PATH",
                    "add the Slurm client's bin directory to PATH in your shell start-up file "
                    "on the login node (~/.bashrc, or `module load slurm` there); jupyter-tiers "
                    "runs them in your login shell's environment", **data)
    if after and setup.tools:
        where = "after the profile's setup lines" if has_setup else "in a job's environment"
        return fail("slurm tools", f"{', '.join(after)} not found {where} (the job script runs "
                    "them there)", "fix the profile's setup so it keeps Slurm on PATH (extend "
                    "PATH, do not replace it)", **data)
    paths = ", ".join(f"{t}" for t in SCHEDULER_TOOLS)
    return ok("slurm tools", f"{paths} found, Slurm {'/'.join(versions) or 'version unknown'}", **data)


def accounting_check(config: Mapping[str, str]) -> Check:
    kind = config.get("AccountingStorageType", "")
    if not kind:
        return warn("accounting", "scontrol show config did not say",
                    "run `scontrol show config` on the login node to see why")
    if kind.endswith("/none"):
        return warn("accounting", f"off ({kind})", "finished jobs are known only while slurmctld "
                    "remembers them (MinJobAge); `jupyter tiers history` needs accounting")
    return ok("accounting", f"on ({kind})", enforce=config.get("AccountingStorageEnforce", ""))


def partitions_check(partitions: list[sp.Partition], groups: set[str],
                     assocs: list[sp.Association], wanted: str | None) -> Check:
    accounts = {a.account for a in assocs}
    usable = [p for p in partitions if sp.usable(p, groups, accounts) is None]
    names = [p.name + ("*" if p.default else "") for p in usable]
    qos = sorted({q for a in assocs for q in a.qos})
    data = {"usable": [p.name for p in usable], "accounts": sorted(accounts), "qos": qos}
    if not partitions:
        return fail("partitions", "scontrol show partition listed none",
                    "the Slurm controller may be down, or no partition is visible to you: "
                    "ask the admins", **data)
    extra = (f"; accounts {','.join(sorted(accounts))}" if accounts else "") + \
        (f"; QOS {','.join(qos)}" if qos else "")
    if wanted and wanted not in [p.name for p in usable]:
        known = next((p for p in partitions if p.name == wanted), None)
        why = sp.usable(known, groups, accounts) if known else "no such partition"
        return fail("partitions", f"the profile's partition {wanted!r} is not usable ({why}); "
                    f"usable: {', '.join(names) or 'none'}{extra}",
                    f"set defaults.partition to one of {', '.join(p.name for p in usable) or '(none)'}"
                    " or ask the admins for access", **data)
    if not usable:
        return fail("partitions", f"none of {', '.join(p.name for p in partitions)} is usable by you",
                    "ask the admins for an association (account) that may use a partition", **data)
    return ok("partitions", f"usable: {', '.join(names)}{extra}", **data)


def gpus_check(nodes: list[sp.NodeType]) -> Check:
    if not nodes:
        return warn("gpus", "sinfo listed no nodes", "run `sinfo -N` on the login node")
    parts = []
    for n in nodes:
        gpus = n.gpus()
        parts.append(f"{n.count}× {n.cpus} CPUs {n.memory_mb} MB " +
                     (f"{gpus} GPUs ({n.gres})" if gpus else "no GPUs"))
    total = sum(n.gpus() * n.count for n in nodes)
    return ok("gpus", f"{total} GPUs in all; node types: " + "; ".join(parts), total=total)


def topology_check(config: Mapping[str, str]) -> Check:
    plugin = config.get("TopologyPlugin", "")
    if plugin and not plugin.endswith(("/none", "/default")):
        return ok("topology", f"{plugin}: --switches places ranks under few switches")
    return warn("topology", f"no topology plugin ({plugin or 'not reported'}): --switches means "
                "nothing on this cluster")


def workdir_check(w: sp.Workdir, workdir: str) -> Check:
    free = f"{w.free_kib / 1024 / 1024:.1f} GiB free" if w.free_kib is not None else "free space unknown"
    data = {"path": w.path, "free_kib": w.free_kib, "mount": w.mount}
    if not w.path:
        return fail("workdir", f"{workdir}: the login node did not report on it",
                    "run the doctor again; if it persists, check the workdir by hand", **data)
    if w.exists and not w.writable:
        return fail("workdir", f"{w.path} is not writable ({w.error or 'mktemp failed'})",
                    "set workdir to a directory you may write to (scratch or home), or "
                    "fix its permissions", **data)
    if not w.exists and not w.parent_writable:
        return fail("workdir", f"{w.path} does not exist and {w.parent or 'its parent'} is not "
                    "writable, so the first job cannot create it",
                    f"create it (mkdir -p {shlex.quote(w.path)}) or set workdir elsewhere", **data)
    if w.free_kib is not None and w.free_kib < FULL_KIB:
        return fail("workdir", f"{w.path} is full: {free} on {w.mount}",
                    "free space there, or set workdir to a file system with room", **data)
    made = "writable" if w.exists else f"not there yet (the first job creates it in {w.parent})"
    if w.free_kib is not None and w.free_kib < LOW_KIB:
        return warn("workdir", f"{w.path}: {made}, only {free} on {w.mount}",
                    "checkpoints may not fit: free space or move the workdir", **data)
    return ok("workdir", f"{w.path}: {made}, {free}", **data)


def setup_check(setup: sp.Setup, python: str, has_setup: bool) -> Check:
    data = {"python": setup.python, "torch": setup.torch, "nccl": setup.nccl}
    if has_setup and setup.status not in (0, None):
        return fail("setup and python", f"the profile's setup lines exit with status {setup.status} "
                    "on the login node", "run them by hand there to see which line fails", **data)
    if not setup.python:
        return fail("setup and python", f"{python!r} does not run on the login node"
                    + (f" ({setup.python_error})" if setup.python_error else ""),
                    "set defaults.python to an interpreter the nodes have (a path, or a name "
                    "on PATH after the setup lines)", **data)
    torch = (f"torch {setup.torch}" + (" with NCCL" if setup.nccl else " (no NCCL)")
             if setup.torch else "torch not importable")
    where = "after setup, " if has_setup else ""
    return ok("setup and python", f"{where}{python} is Python {setup.python}; {torch} "
              "(login node)", **data)


def compute_check(output: str, python: str) -> Check:
    """``--compute``: what srun on one compute node said (:data:`~.slurm_probe.COMPUTE_SH`)."""
    values: dict[str, str] = {}
    others: list[str] = []
    for line in output.splitlines():
        key, sep, rest = line.partition("\t")
        if sep and key in ("node", "srun"):
            values.setdefault(key, rest.strip()[:200])
        else:
            others.append(line)
    setup = sp.parse_setup(others)
    node = values.get("node", "")
    data = {"node": node, "python": setup.python, "torch": setup.torch, "nccl": setup.nccl}
    if not node:
        said = next((ln.strip() for ln in reversed(output.splitlines())
                     if ln.strip() and not ln.startswith("srun\t")), "no output")
        return fail("compute node", f"srun did not start on a node: {said[:200]}",
                    "check the partition/account in the profile's defaults and that a node is "
                    "free (sinfo); --compute waits at most a minute for one", **data)
    if setup.status not in (0, None):
        return fail("compute node", f"{node}: the setup lines exit with status {setup.status}",
                    "run them in an interactive job (srun --pty bash) to see which fails", **data)
    if not setup.python:
        return fail("compute node", f"{node}: {python!r} does not run"
                    + (f" ({setup.python_error})" if setup.python_error else ""),
                    "set defaults.python to an interpreter the compute nodes have", **data)
    torch = (f"torch {setup.torch}" + (" with NCCL" if setup.nccl else " (no NCCL)")
             if setup.torch else "torch not importable")
    return ok("compute node", f"{node}: Python {setup.python}; {torch}", **data)


def slurm_checks(probe: SlurmProbe, *, profile: str, workdir: str, python: str,
                 partition: str | None, has_setup: bool) -> list[Check]:
    """Every check of a Slurm profile, judged from its probes; later stages of a failed earlier
    one are SKIP with the reason."""
    if probe.here:
        return [ok("this machine", "no SSH: the profile has no host, so Slurm's commands run here"),
                *remote_checks(probe, workdir=workdir, python=python, partition=partition,
                               has_setup=has_setup)]
    route = probe.route
    if route.error:
        return [fail("ssh route", route.error, "fix the profile's host/proxy_jump or the "
                     "~/.ssh/config entry it names"),
                *_skipped(("dns", "tcp", *LOGIN_CHECKS, *REMOTE_CHECKS), "no SSH route")]
    hops = route.hops
    via = f" (then {' → '.join(h[1] for h in hops[1:])} through it)" if len(hops) > 1 else ""
    checks: list[Check] = []
    if len(hops) > 1:
        checks.append(ok("ssh route", " → ".join(f"{h[3]}@{h[1]}:{h[2]}" for h in hops)))
    assert probe.reach is not None
    checks += reach_checks(probe.reach, via)
    if probe.login is None:
        return checks + _skipped((*LOGIN_CHECKS, *REMOTE_CHECKS), "the host cannot be reached")
    login = probe.login
    checks.append(host_key_check(login, hops))
    if login.host_key:
        return checks + _skipped(("auth methods", "login", *REMOTE_CHECKS),
                                 "the host key is not trusted")
    checks += auth_checks(login)
    checks.append(login_check(login, profile))
    if probe.remote is None:
        return checks + _skipped(REMOTE_CHECKS, "not logged in")
    return checks + remote_checks(probe, workdir=workdir, python=python, partition=partition,
                                  has_setup=has_setup)


def test_only_check(test_only: RemoteProbe) -> Check:
    """``sbatch --test-only`` of a one-minute job (a profile without host)."""
    if test_only.error:
        return fail("sbatch --test-only", test_only.error,
                    "check the profile's partition and account against `sinfo` and `sacctmgr show assoc`")
    last = test_only.output.splitlines()[-1] if test_only.output else "accepted"
    return ok("sbatch --test-only", last[:200])


def remote_checks(probe: SlurmProbe, *, workdir: str, python: str, partition: str | None,
                  has_setup: bool) -> list[Check]:
    """The checks judged from the doctor's one command on the login node (or this machine)."""
    checks: list[Check] = []
    assert probe.remote is not None
    if probe.remote.error:
        failed = fail("slurm tools", f"the doctor's command failed: {probe.remote.error}",
                      "run the doctor again; check the login node's load")
        return [*checks, failed, *_skipped(REMOTE_CHECKS[1:], "the doctor's command failed")]
    parts = sp.sections(probe.remote.output)
    setup = sp.parse_setup(parts.get("setup", []))
    config = sp.parse_config(parts.get("config", []))
    checks.append(tools_check(sp.parse_tools(parts.get("tools", [])), setup, has_setup))
    checks.append(accounting_check(config))
    groups = {g for line in parts.get("groups", []) for g in line.split()}
    checks.append(partitions_check(sp.parse_partitions(parts.get("partitions", [])), groups,
                                   sp.parse_associations(parts.get("assoc", [])), partition))
    checks.append(gpus_check(sp.parse_nodes(parts.get("nodes", []))))
    checks.append(topology_check(config))
    checks.append(workdir_check(sp.parse_workdir(parts.get("workdir", [])), workdir))
    checks.append(setup_check(setup, python, has_setup))
    if probe.test_only is not None:
        checks.append(test_only_check(probe.test_only))
    if probe.compute is not None:
        checks.append(compute_check(probe.compute.output, python) if not probe.compute.error else
                      fail("compute node", probe.compute.error, "run the doctor again with --compute"))
    return checks
