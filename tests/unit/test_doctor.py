"""Issue 21 section 1, the pure parts of ``jupyter tiers doctor``: the report model, the text and
JSON renderers, the parsers of the remote command's output (with seeded fuzz), the Slurm and
Kubernetes checks judged from made-up probes, the suggested Role, and the local tier's probe on
real directories."""

from __future__ import annotations

import json
import random
import string
import sys
from pathlib import Path

import pytest
import yaml

from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.doctor import local
from jupyter_tiers.doctor import slurm_parse as sp
from jupyter_tiers.doctor.k8s_checks import TIER_ACCESS, k8s_checks, role_yaml, shown_access
from jupyter_tiers.doctor.k8s_probe import K8sProbe, exec_plugin
from jupyter_tiers.doctor.model import Check, ProfileReport, Report, Status, fail, ok, skip, warn
from jupyter_tiers.doctor.render import render_json, render_text, report_data
from jupyter_tiers.doctor.slurm_checks import compute_check, slurm_checks
from jupyter_tiers.doctor.slurm_probe import LoginProbe, ReachProbe, RemoteProbe, RouteProbe, SlurmProbe

SEED = 20261221

OUTPUT = """\
Welcome to the cluster! (a banner)
@@jt-doctor tools
sbatch\t/usr/bin/sbatch\tslurm 23.11.4
squeue\t/usr/bin/squeue\tslurm 23.11.4
sacct\t/usr/bin/sacct\tslurm 23.11.4
scontrol\t/usr/bin/scontrol\tslurm 23.11.4
sinfo\t/usr/bin/sinfo\tslurm 23.11.4
srun\t/usr/bin/srun\tslurm 23.11.4
@@jt-doctor config
AccountingStorageType   = accounting_storage/slurmdbd
ClusterName             = hpc
TopologyPlugin          = topology/tree
@@jt-doctor partitions
PartitionName=cpu AllowGroups=ALL AllowAccounts=ALL Default=YES State=UP Nodes=c[1-8]
PartitionName=gpu AllowGroups=ALL AllowAccounts=ml,vision State=UP Nodes=g[1-2]
PartitionName=admin AllowGroups=wheel AllowAccounts=ALL State=UP Nodes=c1
PartitionName=old AllowGroups=ALL State=DOWN Nodes=c2
@@jt-doctor nodes
c1|64|256000|(null)
c2|64|256000|(null)
c1|64|256000|(null)
g1|32|512000|gpu:a100:4(S:0-1)
g2|32|512000|gpu:a100:4(S:0-1)
@@jt-doctor assoc
ml||normal,high
@@jt-doctor groups
alice users
@@jt-doctor workdir
path\t/scratch/alice/jupyter-tiers
exists\tyes
writable\tyes
df\t209715200\t/scratch
@@jt-doctor setup
setup\t0
tool\tsrun\t/usr/bin/srun\tslurm 23.11.4
tool\tscontrol\t/usr/bin/scontrol\tslurm 23.11.4
python\t3.11.7\t/opt/py/bin/python
torch\t2.3.0\tnccl
"""

HOPS = (("hpc", "login.hpc.example", 22, "alice", "", "/home/alice/.ssh/known_hosts"),)


def _probe(output: str = OUTPUT) -> SlurmProbe:
    return SlurmProbe(RouteProbe(HOPS), ReachProbe("login.hpc.example", 22, ("192.0.2.7",)),
                      LoginProbe(methods={"hpc": ("publickey",)}, logged_in=True), RemoteProbe(output))


def _checks(probe: SlurmProbe, partition: str | None = "gpu") -> dict[str, Check]:
    checks = slurm_checks(probe, profile="hpc", workdir="~/jupyter-tiers", python="/opt/py/bin/python",
                          partition=partition, has_setup=True)
    return {c.name: c for c in checks}


def test_every_fail_says_how_to_fix_it() -> None:
    with pytest.raises(ValueError, match="without saying how to fix it"):
        Check("x", Status.FAIL, "broken")
    assert fail("x", "broken", "do this").fix == "do this"


def test_text_report_one_line_per_check_fix_under_it_and_summary() -> None:
    report = Report((ProfileReport("hpc", "slurm", (
        ok("dns", "login is 192.0.2.7"), warn("topology", "no plugin"),
        fail("workdir", "/x is full\x1b[31m", "free space"), skip("python", "workdir failed"))),))
    assert render_text(report).splitlines() == [
        "hpc (slurm)",
        "  OK    dns: login is 192.0.2.7",
        "  WARN  topology: no plugin",
        "  FAIL  workdir: /x is full?[31m",  # cluster text: control characters shown as '?'
        "        → free space",
        "  SKIP  python: workdir failed",
        "FAILED: 1 OK, 1 WARN, 1 FAIL, 1 SKIP",
    ]
    assert report.exit_status == 1
    good = Report((ProfileReport("l", "local", (ok("a", "b"),)),))
    assert render_text(good).endswith("all good: 1 OK") and good.exit_status == 0


def test_json_report_is_the_same_data() -> None:
    report = Report((ProfileReport("k", "kubernetes", (fail("access", "2 missing", "bind a Role",
                                                            missing=["create deployments.apps"]),),
                                   extra="kind: Role\n"),))
    data = json.loads(render_json(report))
    assert data == report_data(report)
    assert data == {"ok": False, "profiles": [{
        "profile": "k", "tier": "kubernetes", "ok": False, "extra": "kind: Role\n",
        "checks": [{"name": "access", "status": "FAIL", "detail": "2 missing", "fix": "bind a Role",
                    "data": {"missing": ["create deployments.apps"]}}]}]}


def test_a_healthy_cluster_from_its_output() -> None:
    checks = _checks(_probe())
    assert all(c.status is Status.OK for c in checks.values()), checks
    assert checks["slurm tools"].detail == "sbatch, squeue, sacct, scontrol found, Slurm 23.11.4"
    # gpu needs account ml or vision (the user has ml); admin needs group wheel; old is DOWN.
    assert checks["partitions"].detail == "usable: cpu*, gpu; accounts ml; QOS high,normal"
    assert checks["gpus"].data["total"] == 8
    assert "2× 32 CPUs 512000 MB 4 GPUs (gpu:a100:4(S:0-1))" in checks["gpus"].detail
    assert "2× 64 CPUs" in checks["gpus"].detail  # c1 listed twice counts once
    assert checks["workdir"].detail == "/scratch/alice/jupyter-tiers: writable, 200.0 GiB free"
    assert "torch 2.3.0 with NCCL" in checks["setup and python"].detail


@pytest.mark.parametrize(("change", "name", "words"), [
    (("sbatch\t/usr/bin/sbatch\tslurm 23.11.4", "sbatch\t\t"), "slurm tools",
     "sbatch not found on the login node's PATH"),
    (("accounting_storage/slurmdbd", "accounting_storage/none"), "accounting", "off"),
    (("topology/tree", "topology/none"), "topology", "--switches means nothing"),
    (("exists\tyes\nwritable\tyes", "exists\tyes\nwritable\tno\tmktemp: Permission denied"),
     "workdir", "is not writable (mktemp: Permission denied)"),
    (("df\t209715200", "df\t1024"), "workdir", "is full"),
    (("df\t209715200", "df\t524288"), "workdir", "only 0.5 GiB"),
    (("python\t3.11.7\t/opt/py/bin/python\ntorch\t2.3.0\tnccl",
      "bash: /opt/py/bin/python: No such file or directory"), "setup and python", "No such file"),
    (("setup\t0", "setup\t1"), "setup and python", "exit with status 1"),
    (("tool\tsrun\t/usr/bin/srun\tslurm 23.11.4", "tool\tsrun\t\t"), "slurm tools",
     "srun not found after the profile's setup lines"),
])
def test_each_problem_is_reported_where_it_belongs(change: tuple[str, str], name: str, words: str) -> None:
    assert change[0] in OUTPUT
    check = _checks(_probe(OUTPUT.replace(change[0], change[1])))[name]
    assert check.status in (Status.FAIL, Status.WARN) and words in check.detail, check
    assert check.status is Status.WARN or check.fix


def test_a_partition_the_user_may_not_use() -> None:
    check = _checks(_probe(), partition="admin")["partitions"]
    assert check.status is Status.FAIL
    assert check.detail.startswith("the profile's partition 'admin' is not usable (only groups wheel)")
    assert "set defaults.partition to one of cpu, gpu" in check.fix


def test_host_key_and_login_stages() -> None:
    key = {"host": "login.hpc.example", "port": 2222, "key_type": "ssh-ed25519",
           "fingerprint": "SHA256:abc", "known_hosts": ["/home/alice/.ssh/known_hosts"],
           "changed": False, "revoked": False, "file": None, "line": None}
    hops = (("hpc", "login.hpc.example", 2222, "alice", "", "/home/alice/.ssh/known_hosts"),)
    probe = SlurmProbe(RouteProbe(hops), ReachProbe("login.hpc.example", 2222, ("192.0.2.7",)),
                       LoginProbe(host_key=key, host_key_message="unknown"))
    checks = {c.name: c for c in slurm_checks(probe, profile="hpc", workdir="~", python="python3",
                                              partition=None, has_setup=False)}
    host = checks["host key"]
    assert host.status is Status.FAIL and "ssh-ed25519 SHA256:abc" in host.detail
    assert "ssh-keyscan -p 2222 login.hpc.example" in host.fix
    assert "ssh -p 2222 alice@login.hpc.example" in host.fix and "/home/alice/.ssh/known_hosts" in host.fix
    assert checks["login"].status is Status.SKIP and checks["workdir"].status is Status.SKIP
    twofactor = {c.name: c for c in slurm_checks(
        SlurmProbe(RouteProbe(HOPS), ReachProbe("h", 22, ("192.0.2.7",)), LoginProbe(
            methods={"hpc": ("publickey", "keyboard-interactive")},
            auth_error="hpc wants more than a key (keyboard-interactive), which cannot be done")),
        profile="hpc", workdir="~", python="python3", partition=None, has_setup=False)}
    assert twofactor["auth methods"].detail == "hpc offers key, keyboard-interactive (codes/2FA)"
    assert twofactor["login"].status is Status.WARN and "%tiers login -p hpc" in twofactor["login"].fix
    assert twofactor["workdir"].status is Status.SKIP
    # After %tiers login in the same kernel, the doctor's remote command uses that connection.
    reused = {c.name: c for c in slurm_checks(
        SlurmProbe(RouteProbe(HOPS), ReachProbe("h", 22, ("192.0.2.7",)), LoginProbe(
            methods={"hpc": ("publickey", "keyboard-interactive")}, reused=True,
            auth_error="hpc wants more than a key (keyboard-interactive), which cannot be done"),
            RemoteProbe(OUTPUT)),
        profile="hpc", workdir="~", python="python3", partition=None, has_setup=False)}
    assert reused["login"].status is Status.OK and "%tiers login" in reused["login"].detail
    assert reused["workdir"].status is Status.OK
    passwords = {c.name: c for c in slurm_checks(
        SlurmProbe(RouteProbe(HOPS), ReachProbe("h", 22, ("192.0.2.7",)), LoginProbe(
            methods={"hpc": ("password",)}, auth_error="hpc does not accept public-key authentication")),
        profile="hpc", workdir="~", python="python3", partition=None, has_setup=False)}
    assert passwords["auth methods"].status is Status.FAIL
    unresolved = slurm_checks(SlurmProbe(RouteProbe(HOPS), ReachProbe("nope.invalid", 22, dns_error="Name or "
                              "service not known")), profile="hpc", workdir="~", python="python3",
                              partition=None, has_setup=False)
    assert [c.status for c in unresolved][:2] == [Status.FAIL, Status.SKIP]


def test_compute_node_check() -> None:
    good = compute_check("setup\t0\nnode\tg1\npython\t3.11.7\t/opt/py\ntorch\t2.3.0\tnccl\nsrun\t0\n",
                         "python3")
    assert good.status is Status.OK and good.detail == "g1: Python 3.11.7; torch 2.3.0 with NCCL"
    queued = compute_check("srun: error: Unable to allocate resources: Invalid account\nsrun\t1\n", "python3")
    assert queued.status is Status.FAIL
    assert queued.detail == ("srun did not start on a node: "
                             "srun: error: Unable to allocate resources: Invalid account")
    broken = compute_check("setup\t0\nnode\tg1\nbash: python9: command not found\nsrun\t127\n", "python9")
    assert broken.status is Status.FAIL and "python9: command not found" in broken.detail


def test_parsers_read_odd_versions_and_gres() -> None:
    assert sp.slurm_version("slurm-wlm 22.05.8") == "22.05.8"
    assert sp.slurm_version("slurm 24.05.0-0rc1") == "24.05.0-0rc1"
    assert sp.slurm_version("bash: sbatch: command not found") == ""
    assert sp.NodeType("8", "1", "gpu:a100:4,gpu:v100:2(S:0)", 1).gpus() == 6
    assert sp.NodeType("8", "1", "gpu:4", 1).gpus() == 4
    assert sp.NodeType("8", "1", "shard:8,mps:100", 1).gpus() == 0


def _noise(rng: random.Random) -> str:
    pieces = ["@@jt-doctor tools", "@@jt-doctor setup", "@@jt-doctor workdir", "@@jt-doctor nodes",
              "@@jt-doctor partitions", "\t", "|", "=", "PartitionName=", "df\t", "setup\t",
              "python\t", "torch\t", "tool\t", "gpu:", "(null)", "exists\tyes", "slurm 2"]
    alphabet = string.printable + "é\x00\x1b"
    out = []
    for _ in range(rng.randint(0, 40)):
        out.append(rng.choice(pieces) if rng.random() < 0.5 else
                   "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))))
        out.append(rng.choice(["\n", "", "\t", "|"]))
    return "".join(out)


def test_fuzz_any_remote_output_gives_checks_never_an_exception() -> None:
    rng = random.Random(SEED)
    for _ in range(1500):
        text = _noise(rng)
        checks = slurm_checks(_probe(text), profile="hpc", workdir="~/x", python="python3",
                              partition=rng.choice([None, "gpu"]), has_setup=rng.random() < 0.5)
        assert [c.name for c in checks][-7:] == ["slurm tools", "accounting", "partitions", "gpus",
                                                 "topology", "workdir", "setup and python"], text
        for c in checks:
            assert c.status is not Status.FAIL or c.fix
        render_text(Report((ProfileReport("hpc", "slurm", tuple(checks)),)))
        compute = compute_check(text, "python3")
        assert compute.status is not Status.FAIL or compute.fix
        for lines in sp.sections(text).values():
            for tool in sp.parse_tools(lines).values():
                assert "\n" not in tool.path and (tool.path or not tool.version)
            for n in sp.parse_nodes(lines):
                assert n.count >= 1 and n.gpus() >= 0
            w = sp.parse_workdir(lines)
            assert w.free_kib is None or w.free_kib >= 0


# --- Kubernetes -------------------------------------------------------------------------------

def test_access_lists_the_missing_in_one_line_and_the_role_grants_exactly_them() -> None:
    allowed = {a: a[2] in ("get", "list", "watch") and a[1] != "secrets" for a in TIER_ACCESS}
    probe = K8sProbe(kubeconfig="/k", context="dev", server="https://k:6443", version="v1.28.4",
                     namespace="ml", namespace_status=200, allowed=allowed, gpu_nodes=1, nodes=3,
                     gpus=8, metrics_api=True)
    checks = {c.name: c for c in k8s_checks(probe)}
    access = checks["access"]
    missing = [a for a in TIER_ACCESS if not allowed[a]]
    assert access.status is Status.FAIL and access.data["missing"] == [shown_access(*a) for a in missing]
    assert "create deployments.apps" in access.detail and "create pods/portforward" in access.detail
    assert "get pods" not in access.detail and "--suggest-role" in access.fix
    role = yaml.safe_load(role_yaml(missing, "ml"))
    assert role["kind"] == "Role" and role["metadata"] == {"name": "jupyter-tiers", "namespace": "ml"}
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"]
               for r in rule["resources"] for v in rule["verbs"]}
    assert granted == set(missing)
    assert checks["gpus"].detail == "1 of 3 nodes have nvidia.com/gpu allocatable (8 GPUs)"


def test_k8s_stages() -> None:
    refused = k8s_checks(K8sProbe(kubeconfig="/k", exec_command="aws", exec_refused="./tiers.yaml"))
    assert refused[0].status is Status.WARN and "'aws', not run" in refused[0].detail
    assert all(c.status is Status.SKIP for c in refused[1:])
    missing_ns = {c.name: c for c in k8s_checks(K8sProbe(kubeconfig="/k", version="v1", namespace="nope",
                                                         namespace_status=404))}
    assert missing_ns["namespace"].status is Status.FAIL
    assert "kubectl create namespace nope" in missing_ns["namespace"].fix


def test_exec_plugin_is_named_from_the_kubeconfig() -> None:
    text = yaml.safe_dump({
        "current-context": "a", "contexts": [{"name": "a", "context": {"user": "u"}},
                                             {"name": "b", "context": {"user": "v"}}],
        "users": [{"name": "u", "user": {"exec": {"command": "gke-gcloud-auth-plugin"}}},
                  {"name": "v", "user": {"token": "secret"}}]})
    assert exec_plugin(text, None) == ("a", "gke-gcloud-auth-plugin")
    assert exec_plugin(text, "b") == ("b", "")
    assert exec_plugin(": : not yaml [", None) == ("", "")
    assert exec_plugin("[1, 2]", None) == ("", "")


def test_fuzz_exec_plugin_reads_any_kubeconfig() -> None:
    rng = random.Random(SEED + 1)
    leaves: list[object] = [None, 0, 3.5, True, "a", "", [], {}, "u", "ctx", "plugin"]

    def value(depth: int) -> object:
        roll = rng.random()
        if depth > 3 or roll < 0.4:
            return rng.choice(leaves)
        if roll < 0.7:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        keys = ["name", "context", "user", "users", "contexts", "exec", "command", "current-context", "x"]
        return {rng.choice(keys): value(depth + 1) for _ in range(rng.randint(0, 4))}

    for _ in range(2000):
        data = value(0)
        name, command = exec_plugin(yaml.safe_dump(data), rng.choice([None, "ctx", "a"]))
        assert isinstance(name, str) and isinstance(command, str) and len(command) <= 200
    assert exec_plugin("\x00 not: [yaml", None) == ("", "")


# --- local ------------------------------------------------------------------------------------

def test_local_workdir_private_or_not(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    checks = {c.name: c for c in local.local_checks(local.probe(Profile(
        "l", "local", settings={"workdir": str(private)}, defaults={"python": sys.executable})))}
    assert checks["workdir"].status is Status.OK and checks["python"].status is Status.OK
    assert checks["ports"].status is Status.OK and not list(private.iterdir())
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    bad = {c.name: c for c in local.local_checks(local.probe(Profile(
        "l", "local", settings={"workdir": str(shared)}, defaults={"python": "/nonexistent/python"})))}
    assert bad["workdir"].status is Status.FAIL and "mode 0777" in bad["workdir"].detail
    assert bad["python"].status is Status.FAIL and "torch" not in bad


def test_a_profile_without_host_is_checked_here_with_no_ssh_stages() -> None:
    from jupyter_tiers.doctor.slurm_checks import slurm_checks
    from jupyter_tiers.doctor.slurm_probe import RemoteProbe, RouteProbe, SlurmProbe

    probe = SlurmProbe(RouteProbe(), remote=RemoteProbe(error="boom"), here=True)
    checks = slurm_checks(probe, profile="cluster", workdir="~/w", python="python3", partition=None,
                          has_setup=False)
    names = [c.name for c in checks]
    assert names[0] == "this machine" and checks[0].status.name == "OK"
    assert not {"ssh route", "dns", "tcp", "host key", "auth methods", "login"} & set(names)
    assert checks[1].status.name == "FAIL" and "boom" in checks[1].detail
    refused = SlurmProbe(RouteProbe(), remote=RemoteProbe(output=""), here=True,
                         test_only=RemoteProbe(error="sbatch: error: invalid partition specified: nope"))
    last = slurm_checks(refused, profile="cluster", workdir="~/w", python="python3", partition=None,
                        has_setup=False)[-1]
    assert last.name == "sbatch --test-only" and last.status.name == "FAIL"
    assert "invalid partition" in last.detail
