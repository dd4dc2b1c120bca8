"""Issue 21 section 2: ``jupyter tiers init``. The pure parts (ssh_config, known_hosts and
kubeconfig readers, the question plan, the YAML line edit) with seeded fuzz; then the command
into a temporary HOME with a crafted ~/.ssh/config, known_hosts and kubeconfig: non-interactive
with flags, interactive scripted through stdin, in a notebook, an existing file's comments kept,
no overwrite without --force, and the written file loads and the doctor runs on it. No network:
the crafted hosts' keys are unknown, so init never logs in (the cluster test does, for sinfo)."""

from __future__ import annotations

import base64
import io
import random
import string
from pathlib import Path
from typing import Any

import pytest
import yaml

from jupyter_tiers.config.profiles import TIERS, ConfigError, load_config, load_file, merge_layers
from jupyter_tiers.doctor import run_doctor
from jupyter_tiers.doctor.model import Status
from jupyter_tiers.faces import cli, tiers_command
from jupyter_tiers.tools.profile_init import discover
from jupyter_tiers.tools.profile_init.plan import KEYS, Facts, PlanError, answer, build_profile, next_question
from jupyter_tiers.tools.profile_init.yamlfile import MergeError, add_profile, render_file
from jupyter_tiers.transport.sshconfig import parse_known_hosts_line

SEED = 20261203


def _blob(kind: str = "ssh-ed25519", fill: int = 7) -> str:
    raw = len(kind).to_bytes(4, "big") + kind.encode() + (32).to_bytes(4, "big") + bytes([fill]) * 32
    return base64.b64encode(raw).decode()


SSH_CONFIG = """\
# the lab's clusters
Host hpc
  HostName login.hpc.example.org
  User alice
  Port 2222
  IdentityFile ~/.ssh/id_hpc
  ProxyJump gw

Host gw
  HostName gateway.example.org
  User alice

Host nouser
  HostName 192.0.2.10

Host *.internal !bad -oProxyCommand=evil
  User bob
"""

KUBECONFIG = """\
apiVersion: v1
kind: Config
current-context: dev
clusters: []
contexts:
- name: dev
  context: {cluster: c1, user: u1, namespace: team-a}
- name: prod
  context: {cluster: c2, user: u2}
users:
- name: u2
  user: {exec: {command: aws-iam-authenticator, apiVersion: client.authentication.k8s.io/v1}}
"""

EXISTING = """\
# Our profiles. Keep this comment.
default_profile: mine   # the one I use

profiles:
  # my laptop
  mine:
    tier: local
    workdir: /tmp/mine   # scratch
  other:
    tier: local   # second

# trailing comment
"""


# --- the readers ---------------------------------------------------------------------------------


def test_ssh_hosts_are_the_named_entries_as_ssh_sees_them() -> None:
    hosts = {h.alias: h for h in discover.ssh_hosts(discover.parse_ssh_config(SSH_CONFIG))}
    assert list(hosts) == ["hpc", "gw", "nouser"]  # no wildcard, negated or option-like names
    hpc = hosts["hpc"]
    assert (hpc.hostname, hpc.user, hpc.port, hpc.proxy_jump) == (
        "login.hpc.example.org", "alice", 2222, "gw")
    assert hpc.identity_file.endswith("id_hpc")
    assert hpc.known_hosts_name == "[login.hpc.example.org]:2222"
    assert hosts["nouser"].user == "" and hosts["nouser"].port == 22


def test_a_key_is_known_by_host_and_port() -> None:
    entries = [e for e in (parse_known_hosts_line(line) for line in (
        f"[login.hpc.example.org]:2222 ssh-ed25519 {_blob()}",
        f"@revoked gateway.example.org ssh-ed25519 {_blob()}",
        "# a comment", "garbage")) if e]
    assert discover.key_known(entries, "login.hpc.example.org", 2222)
    assert not discover.key_known(entries, "login.hpc.example.org", 22)
    assert not discover.key_known(entries, "gateway.example.org", 22)  # only revoked there


def test_kube_contexts_with_namespace_current_and_exec_plugin() -> None:
    contexts, current = discover.kube_contexts(KUBECONFIG)
    assert current == "dev"
    assert [(c.name, c.namespace, c.current) for c in contexts] == [("dev", "team-a", True),
                                                                    ("prod", "", False)]
    assert contexts[1].exec_command == "aws-iam-authenticator"
    with pytest.raises(discover.DiscoverError):
        discover.kube_contexts("[1, 2]")
    assert discover.kube_contexts("") == ([], "")


def test_sinfo_partitions_and_the_default() -> None:
    assert discover.parse_sinfo("debug*\npreemptible\n\ngpu\ndebug\n$(rm -rf)\n") == (
        ["debug", "preemptible", "gpu"], "debug")


# --- the plan ------------------------------------------------------------------------------------


def _facts(**changes: Any) -> Facts:
    hosts = tuple(discover.ssh_hosts(discover.parse_ssh_config(SSH_CONFIG)))
    contexts, current = discover.kube_contexts(KUBECONFIG)
    base: dict[str, Any] = {"ssh_hosts": hosts, "contexts": tuple(contexts), "current_context": current,
                            "local_user": "me"}
    return Facts(**{**base, **changes})


def _run_plan(facts: Facts, replies: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    asked: list[str] = []
    answers: dict[str, str] = {}
    while (q := next_question(answers, facts)) is not None:
        asked.append(q.key)
        answers = answer(q.key, replies.get(q.key, ""), answers, q)
    return asked, answers


def test_only_what_was_not_found_is_asked() -> None:
    asked, answers = _run_plan(_facts(), {})
    assert asked == ["tier", "host", "workdir", "partition", "name"]  # User came from ~/.ssh/config
    name, profile = build_profile(answers, _facts())
    assert (name, profile) == ("hpc", {"tier": "slurm", "host": "hpc", "workdir": "~/jupyter-tiers"})
    host = next_question({"tier": "slurm"}, _facts(known={"hpc": True}))
    assert host is not None and host.labels[0] == (
        "hpc (alice@login.hpc.example.org:2222 via gw; host key known)")
    asked, answers = _run_plan(_facts(), {"host": "3"})  # a number picks from the list
    assert asked == ["tier", "host", "user", "workdir", "partition", "name"]
    assert build_profile(answers, _facts())[1]["user"] == "me"
    asked, answers = _run_plan(_facts(), {"tier": "kubernetes", "context": "prod"})
    assert asked == ["tier", "context", "namespace", "name"]
    assert build_profile(answers, _facts())[1] == {"tier": "kubernetes", "context": "prod",
                                                   "namespace": "default"}
    assert _run_plan(_facts(), {"tier": "2"})[1]["tier"] == "local"  # numbers pick from the list
    asked, answers = _run_plan(Facts(), {"workdir": "/scratch/me"})
    assert asked == ["tier", "workdir", "name"] and answers["tier"] == "local"


def test_answers_are_validated_like_the_config() -> None:
    for key, value, words in [("host", "-oProxyCommand=x", "not a host name"),
                              ("user", "a b", "not a user name"), ("port", "70000", "1 to 65535"),
                              ("namespace", "Team_A", "DNS-1123"), ("tier", "cloud", "one of"),
                              ("name", "a/b", "letters, digits"), ("partition", "a;b", "partition"),
                              ("workdir", "a\x00b", "printable")]:
        with pytest.raises(PlanError, match=words):
            answer(key, value, {"tier": "kubernetes" if key == "namespace" else "slurm"})


def test_fuzz_flags_give_a_loadable_profile_or_one_plan_error() -> None:
    rng = random.Random(SEED)
    alphabet = string.ascii_letters + string.digits + "-_.@:/~ *$;'\"\\\x00\x1b[]é"
    facts = _facts()
    for _ in range(1500):
        answers: dict[str, str] = {}
        try:
            for key in rng.sample(KEYS, rng.randint(1, len(KEYS))):
                value = rng.choice([*TIERS, "k8s", "hpc", "dev", ""]) if rng.random() < 0.3 else \
                    "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
                answers = answer(key, value, answers)
        except PlanError as exc:
            assert str(exc) and "\n" not in str(exc)
            continue
        # Fill the rest with the questions' defaults; what comes out must load.
        try:
            while (q := next_question(answers, facts)) is not None:
                answers = answer(q.key, q.default or "x", answers, q)
            name, profile = build_profile(answers, facts)
        except PlanError:
            continue
        merge_layers([("fuzz", {"profiles": {name: profile}})])


def test_fuzz_the_readers_never_raise_anything_else() -> None:
    rng = random.Random(SEED + 1)
    words = ["Host", "HostName", "User", "Port", "ProxyJump", "IdentityFile", "Match", "Include",
             "*", "!", "=", "a", "b.example", "22", "0", "99999", "-x", "\"q\"", "%h", "\t", "#"]
    for _ in range(800):
        text = "\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(0, 4)))
                         for _ in range(rng.randint(0, 12)))
        try:
            hosts = discover.ssh_hosts(discover.parse_ssh_config(text))
        except discover.DiscoverError:
            continue
        assert all(1 <= h.port <= 65535 and "*" not in h.alias for h in hosts)
    for _ in range(800):
        value = _yamlish(rng)
        try:
            contexts, _current = discover.kube_contexts(yaml.safe_dump(value))
        except discover.DiscoverError:
            continue
        assert all(isinstance(c.name, str) and isinstance(c.namespace, str) for c in contexts)
    for _ in range(300):
        discover.parse_sinfo("".join(rng.choice("ab*\n \x00é-") for _ in range(rng.randint(0, 40))))


def _yamlish(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.random()
    if depth > 3 or pick < 0.3:
        return rng.choice(["dev", "", 3, None, True, "team-a", ["x"]])
    if pick < 0.6:
        return [_yamlish(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    keys = ["contexts", "name", "context", "namespace", "current-context", "users", "user", "exec",
            "command", "cluster"]
    return {rng.choice(keys): _yamlish(rng, depth + 1) for _ in range(rng.randint(0, 4))}


# --- the YAML edit -------------------------------------------------------------------------------


def test_adding_a_profile_keeps_every_comment_and_the_order() -> None:
    new = {"tier": "slurm", "host": "hpc", "workdir": "~/jt", "defaults": {"partition": "gpu"}}
    out = add_profile(EXISTING, "hpc", new)
    assert out.startswith(EXISTING.split("\n# trailing")[0])  # everything before, byte for byte
    assert out.endswith("\n# trailing comment\n")
    assert yaml.safe_load(out)["profiles"]["hpc"] == new
    assert list(yaml.safe_load(out)["profiles"]) == ["mine", "other", "hpc"]
    with pytest.raises(MergeError, match="already has"):
        add_profile(EXISTING, "mine", new)
    replaced = add_profile(EXISTING, "mine", {"tier": "local", "workdir": "/x"}, replace=True)
    assert "# my laptop" in replaced and "tier: local   # second" in replaced
    assert "/tmp/mine" not in replaced and yaml.safe_load(replaced)["profiles"]["mine"]["workdir"] == "/x"
    assert list(yaml.safe_load(replaced)["profiles"]) == ["mine", "other"]


def test_files_a_line_edit_cannot_follow_are_refused() -> None:
    with pytest.raises(MergeError, match="block mapping"):
        add_profile("profiles: {a: {tier: local}}\n", "b", {"tier": "local"})
    assert yaml.safe_load(add_profile("# only a comment\n", "b", {"tier": "local"})) == {
        "profiles": {"b": {"tier": "local"}}}
    assert yaml.safe_load(add_profile("default_profile: local\n", "b", {"tier": "local"}))["profiles"] == {
        "b": {"tier": "local"}}
    four = "profiles:\n    a:\n        tier: local\ndefault_profile: a\n"
    out = add_profile(four, "b", {"tier": "local"})
    assert out.endswith("default_profile: a\n") and yaml.safe_load(out)["profiles"]["b"] == {"tier": "local"}


def test_fuzz_the_edit_gives_the_old_document_plus_the_profile_or_a_merge_error() -> None:
    rng = random.Random(SEED + 2)
    pieces = ["profiles:", "  a:", "    tier: local", "  # c", "# top", "", "default_profile: a",
              "    workdir: /x   # w", "  b: {tier: local}", "profiles: {}", "  'q':", "   odd: 1",
              "---", "\t", "  b:", "    tier: local"]
    for _ in range(1500):
        text = "\n".join(rng.choice(pieces) for _ in range(rng.randint(0, 10))) + rng.choice(["", "\n"])
        try:
            before = yaml.safe_load(text)
        except yaml.YAMLError:
            before = "invalid"
        try:
            out = add_profile(text, "b", {"tier": "local", "workdir": "/w"}, replace=rng.random() < 0.5)
        except MergeError:
            continue
        after = yaml.safe_load(out)
        assert after["profiles"]["b"] == {"tier": "local", "workdir": "/w"}
        old = dict(before or {})
        old["profiles"] = {**(old.get("profiles") or {}), "b": after["profiles"]["b"]}
        assert after == old


# --- the command ---------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME with the crafted ~/.ssh/config, known_hosts (one unrelated key) and kubeconfig."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(SSH_CONFIG)
    (home / ".ssh" / "known_hosts").write_text(f"elsewhere.example.org ssh-ed25519 {_blob()}\n")
    (home / ".kube").mkdir()
    (home / ".kube" / "config").write_text(KUBECONFIG)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("JUPYTER_TIERS_CONFIG", raising=False)
    monkeypatch.setenv("USER", "me")
    monkeypatch.setenv("LOGNAME", "me")
    # tests that want it say so
    monkeypatch.setattr("jupyter_tiers.config.profiles.sbatch_here", lambda: False)
    monkeypatch.chdir(tmp_path)
    return home


def _tiers_yaml(home: Path) -> Path:
    return home / ".jupyter" / "tiers.yaml"


def test_non_interactive_with_flags_writes_a_profile_that_loads(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = cli.main(["init", "--yes", "--no-doctor", "--host", "hpc", "--workdir", "/scratch/alice/jt",
                       "--partition", "gpu"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "sinfo" not in out and "not in known_hosts" not in out  # --partition given: no look-up
    path = _tiers_yaml(home)
    assert yaml.safe_load(path.read_text()) == {"profiles": {"hpc": {
        "tier": "slurm", "host": "hpc", "workdir": "/scratch/alice/jt", "defaults": {"partition": "gpu"}}}}
    profile = load_config().profile("hpc")  # the user layer, as every kernel reads it
    assert profile.tier == "slurm" and profile.defaults["partition"] == "gpu"
    # A host not in ~/.ssh/config: user and port go into the profile.
    status = cli.main(["init", "--yes", "--no-doctor", "--tier", "slurm", "--host", "192.0.2.7",
                       "--user", "bob", "--port", "2200", "--name", "far"])
    assert status == 0
    out = capsys.readouterr().out
    assert "192.0.2.7: its host key is not in known_hosts, so init does not log in" in out
    assert "`ssh-keyscan -p 2200 192.0.2.7 | ssh-keygen -lf -`" in out
    assert "`ssh -p 2200 bob@192.0.2.7`" in out
    assert load_file(path)["profiles"]["far"] == {"tier": "slurm", "host": "192.0.2.7", "user": "bob",
                                                 "port": 2200, "workdir": "~/jupyter-tiers"}


def test_bad_flags_are_one_line_naming_the_flag(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, words in [(["--host", "a b"], "--host: 'a b' is not a host name"),
                        (["--tier", "cloud"], "--tier: one of slurm, local, kubernetes"),
                        (["--tier", "kubernetes", "--namespace", "No"], "--namespace: a DNS-1123 label"),
                        (["--port", "x"], "--port: a number from 1 to 65535")]:
        assert cli.main(["init", "--yes", "--no-doctor", *argv]) == 1
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, err
    assert not _tiers_yaml(home).exists()


def test_interactive_answers_from_stdin(home: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    # tier: kubernetes; context: 2 (prod); namespace: a bad one, then ml; name: default; write: yes
    monkeypatch.setattr("sys.stdin", io.StringIO("kubernetes\n2\nML!\nml\n\ny\n"))
    assert cli.main(["init", "--no-doctor"]) == 0
    out = capsys.readouterr().out
    assert "1. dev (cluster c1, namespace team-a, current)" in out and "namespace: a DNS-1123 label" in out
    assert "2. prod (cluster c2, exec plugin aws-iam-authenticator)" in out
    assert load_file(_tiers_yaml(home))["profiles"] == {
        "prod": {"tier": "kubernetes", "context": "prod", "namespace": "ml"}}
    # The end of input is an answer too: nothing is written, one line says why.
    monkeypatch.setattr("sys.stdin", io.StringIO("slurm\n"))
    assert cli.main(["init", "--no-doctor"]) == 1
    assert "no answer for host" in capsys.readouterr().err


def test_an_existing_file_keeps_its_comments_and_is_not_overwritten_without_asking(
        home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    path = _tiers_yaml(home)
    path.parent.mkdir()
    path.write_text(EXISTING)
    path.chmod(0o600)
    assert cli.main(["init", "--yes", "--no-doctor", "--tier", "kubernetes", "--name", "dev"]) == 0
    text = path.read_text()
    assert text.startswith(EXISTING.split("\n# trailing")[0]) and "# trailing comment" in text
    assert path.stat().st_mode & 0o777 == 0o600
    assert load_file(path)["profiles"]["dev"] == {"tier": "kubernetes", "context": "dev",
                                                  "namespace": "team-a"}
    before = path.read_text()
    # Same name again: refused without --force (non-interactive), and when the answer is no.
    assert cli.main(["init", "--yes", "--no-doctor", "--tier", "local", "--name", "mine"]) == 1
    assert "already has a profile 'mine'; not replaced" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    assert cli.main(["init", "--no-doctor", "--tier", "local", "--name", "mine", "--workdir", "/w"]) == 1
    assert path.read_text() == before
    # --force replaces it in place; every other line stays.
    assert cli.main(["init", "--yes", "--force", "--no-doctor", "--tier", "local", "--name", "mine",
                     "--workdir", "/w"]) == 0
    text = path.read_text()
    assert "/tmp/mine" not in text and "# my laptop" in text and "tier: local   # second" in text
    assert load_file(path)["profiles"]["mine"] == {"tier": "local", "workdir": "/w"}


def test_a_file_that_does_not_load_is_never_touched(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _tiers_yaml(home)
    path.parent.mkdir()
    path.write_text("profiles:\n  a: {tier: cloud}\n")
    assert cli.main(["init", "--yes", "--no-doctor", "--tier", "local"]) == 1
    assert "fix the file first" in capsys.readouterr().err
    assert path.read_text() == "profiles:\n  a: {tier: cloud}\n"


def test_the_doctor_runs_on_the_result_and_on_the_written_file(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "elsewhere" / "tiers.yaml"
    assert cli.main(["init", "--yes", "--config", str(path), "--tier", "local", "--name", "lab",
                     "--workdir", str(tmp_path / "jobs")]) == 0
    out = capsys.readouterr().out
    assert "checking it (jupyter tiers doctor lab):" in out and "lab (local)" in out
    assert not _tiers_yaml(home).exists()  # --config: only that file
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    report = run_doctor(load_config(), ["lab"])
    assert report.profiles[0].checks and report.profiles[0].tier == "local"
    # A kubernetes profile whose kubeconfig names no cluster: the doctor's FAIL is shown, and
    # the profile is still written (the file is right; the cluster side is what to fix).
    assert cli.main(["init", "--yes", "--config", str(path), "--tier", "kubernetes"]) == 0
    out = capsys.readouterr().out
    assert "FAIL  kubeconfig:" in out and "wrote profile dev" in out
    report = run_doctor(load_config(), ["dev"])
    assert report.profiles[0].checks[0].status is Status.FAIL


def test_in_a_notebook_nothing_is_asked_and_it_writes_only_with_yes(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shell = object()
    assert tiers_command.run(["init", "--no-doctor", "--tier", "local"], shell=shell) is None
    out = capsys.readouterr().out
    assert "add --yes to write it" in out and "tier: local" in out
    assert not _tiers_yaml(home).exists()
    tiers_command.run(["init", "--no-doctor", "--tier", "local", "--yes"], shell=shell)
    assert load_file(_tiers_yaml(home))["profiles"] == {"local-2": {"tier": "local",
                                                                   "workdir": "~/jupyter-tiers"}}


def test_a_secret_never_reaches_the_file(home: Path) -> None:
    """The profile holds names and paths only: not the kubeconfig's token, not a key."""
    (home / ".kube" / "config").write_text(KUBECONFIG.replace("users:", "users:\n- name: u1\n  user: "
                                                              "{token: tok-SECRET-1}"))
    assert cli.main(["init", "--yes", "--no-doctor", "--tier", "kubernetes"]) == 0
    assert "SECRET" not in _tiers_yaml(home).read_text()


def test_render_file_is_a_valid_config() -> None:
    text = render_file("x", {"tier": "local", "workdir": "/a b: c"})
    assert yaml.safe_load(text) == {"profiles": {"x": {"tier": "local", "workdir": "/a b: c"}}}
    with pytest.raises(ConfigError):
        merge_layers([("t", {"profiles": {"x": {"tier": "slurm", "port": 22}}})])  # the loader's own rule


def test_fuzz_init_command_lines_give_a_profile_or_one_short_error(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Random flags and values on ``%tiers init`` (no doctor, dry run): a shown profile, or one
    CommandUsage / InitError line; never another exception, never a file."""
    from jupyter_tiers.core.errors import TiersError

    rng = random.Random(SEED + 3)
    flags = ["--name", "--tier", "--host", "--user", "--port", "--workdir", "--partition", "--context",
             "--namespace", "--config", "--yes", "--force", "--bogus", "-y"]
    values = ["hpc", "gw", "dev", "prod", "slurm", "kubernetes", "k8s", "local", "", "0", "22", "-x",
              "a b", "/w", "~/x", "é", "\x1b[31m", "ns-1", "NS", "--", "x" * 300]
    for _ in range(120):
        argv = ["init", "--dry-run", "--no-doctor"]
        for _ in range(rng.randint(0, 5)):
            flag = rng.choice(flags)
            argv += [flag] if flag in ("--yes", "--force", "-y") else [flag, rng.choice(values)]
        try:
            tiers_command.run(argv, shell=object())
        except (tiers_command.CommandUsage, TiersError) as exc:
            assert str(exc).strip() and "Traceback" not in str(exc)
        capsys.readouterr()
    assert not _tiers_yaml(home).exists()
    assert not any(p.name.endswith(".yaml") for p in home.rglob("*") if p.parent.name != ".kube")


def test_on_a_slurm_machine_init_offers_the_builtin_cluster_profile(
        home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("jupyter_tiers.config.profiles.sbatch_here", lambda: True)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    assert cli.main(["init", "--no-doctor"]) == 0
    out = capsys.readouterr().out
    assert "the built-in profile 'cluster' runs jobs on this cluster with no SSH" in out
    assert "nothing written; use it with --profile cluster" in out
    assert not _tiers_yaml(home).exists()
    # Declined, or not interactive: init goes on to write a profile as before.
    monkeypatch.setattr("sys.stdin", io.StringIO("n\nkubernetes\n2\nml\n\ny\n"))
    assert cli.main(["init", "--no-doctor"]) == 0
    assert load_file(_tiers_yaml(home))["profiles"]["prod"]["namespace"] == "ml"
