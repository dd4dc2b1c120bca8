"""Issue 9: seeded fuzz of ``%%slurm_train`` and ``%tiers`` lines and of tiers.yaml files.

Whatever is typed or written, the answer is a dry run, a listing, or one short UsageError /
ConfigError, never a traceback, and no env value shows. Every ``%%slurm_train`` line carries
``--dry-run``, so nothing runs; the slurm profile's host is TEST-NET-1 (nothing answers there).
(``%%k8s_serve`` lines are fuzzed in tests/unit/test_k8s_fuzz.py.)
"""

from __future__ import annotations

import contextlib
import random
import shlex
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from jupyter_tiers import api
from jupyter_tiers.config import profiles as config
from jupyter_tiers.config.profiles import ConfigError, ProjectFileRefused, load_config
from jupyter_tiers.core.errors import TiersError
from jupyter_tiers.faces.magics import TiersMagics
from tests.helpers import check_fuzz_answer, fuzz_tiers_line, fuzz_word

SEED = 20261209
LINES = 3000
CONFIGS = 400
SECRET = "tok-Hz7SECRET"
KERNEL_SECRET = "kern-Pq4SECRET"
PROFILE_SECRET = "prof-Xy2SECRET"
SECRETS = (SECRET, KERNEL_SECRET, PROFILE_SECRET)


class Shell:
    """What the magics use of IPython's shell: ``user_ns``; called as IPython calls them (the
    magics opt out of IPython's expansion, so the line arrives as typed)."""

    def __init__(self) -> None:
        self.user_ns: dict[str, Any] = {"n": 2, "name": "fz", "word": "EXPANDED", "d": {"a": 1}}
        self.magics = TiersMagics(shell=self)  # type: ignore[arg-type]


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Shell]:
    tiers_yaml = tmp_path / "tiers.yaml"
    tiers_yaml.write_text(textwrap.dedent(f"""\
        default_profile: loc
        profiles:
          loc:
            tier: local
            workdir: {tmp_path / "jobs"}
            env: {{PROFILE_TOKEN: "{PROFILE_SECRET}"}}
          far:
            tier: slurm
            host: 192.0.2.1
            user: nobody
            connect_timeout: 1
            defaults: {{partition: debug}}
            env: {{PROFILE_TOKEN: "{PROFILE_SECRET}"}}
        """))
    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "no-system-tiers.yaml")
    monkeypatch.setattr(config, "USER_PATH", tmp_path / "no-user-tiers.yaml")
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(tiers_yaml))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter-data"))
    monkeypatch.setenv("JUPYTER_TIERS_REGISTRY", str(tmp_path / "registry.sqlite"))
    monkeypatch.setenv("JUPYTER_TIERS_DISPLAY", "text")
    monkeypatch.setenv("FUZZ_KERNEL_TOKEN", KERNEL_SECRET)
    monkeypatch.setenv("FUZZ_BAD_BYTES", "abc\udcff")
    yield Shell()
    api.close_all()


OPTIONS = [
    "--profile", "-p", "--name", "-n", "--nodes", "-N", "--ntasks-per-node", "--gpus-per-node",
    "--cpus-per-task", "--mem", "--time", "-t", "--partition", "--account", "--qos", "--constraint",
    "--switches", "--launcher", "--nproc-per-node", "--python", "--sbatch", "--out", "--bogus", "-x",
    "--checkpoint-dir", "--metrics",
]
FLAGS = ["--exclusive", "--requeue", "--shell", "--text", "--wait", "--resubmit", "--force", "-h", "--"]
ENV_VALUES = [f"TOKEN={SECRET}", f"={SECRET}", f"TOKEN:{SECRET}", f"JT_TOKEN={SECRET}", f"A B={SECRET}",
              f"RANK={SECRET}", f"PATH={SECRET}", f"P=pa${SECRET}", f"P={{{SECRET}}}", "FUZZ_KERNEL_TOKEN",
              "FUZZ_BAD_BYTES", "=FUZZ_KERNEL_TOKEN", f"T={SECRET}\n", f"T={SECRET}\x00"]
VALUES = [
    "", "x", "job", "a" * 200, "-1", "0", "1", "2", "65536", "1e20", "9" * 30, "1.5", "4G", "16G\n",
    "01:00:00", "1-02:03:04", "99999999999", "1@10:00", "a100:8", "gpu,debug", "gpu\n", "a&b|c",
    "torchrun", "srun", "mpirun", "python3", "~/venv/bin/python", "~user/py", "py;rm -rf /", "$(id)",
    "`id`", "'", '"', "\\", "\t", "ÜBER", "\udcff", "\u202e", "\x00", "--", "-", "=", "--hold",
    "--open-m=truncate", "--arr=1-3", "--ntasks-per-n=9", "--chd=/", "--wra=id", "--output=/etc/x",
    "--comment=a b", "--x=$(id)", "loc", "far", "nope", "__builtins__", "class", "None", "ok_var",
    "{n}", "{name}", "$word", "{d['a']}", "{undefined}", "{", "}", "$", "$$", "{n*1000000}",
    "loss=loss: (\\d+)", "loss=(", "=x", "loss=", "a b=(x)", "loss=(a)(b)", "loss=" + "(a*)*" * 20,
    "/scratch/ckpt", "../up", "~/ckpt",
]
BODIES = ["print('hi')\n", "", "   \n", "\udcff\n", "x = 1\n" * 3, "\x00\n", "echo hi\n"]


def _train_line(rng: random.Random) -> str:
    groups = ["--dry-run"]
    for _ in range(rng.randint(0, 7)):
        roll = rng.random()
        if roll < 0.15:
            groups.append(f"{rng.choice(['--env', '-e'])} {shlex.quote(rng.choice(ENV_VALUES))}")
        elif roll < 0.25:
            groups.append(rng.choice(FLAGS))
        elif roll < 0.4:
            groups.append(f"{rng.choice(OPTIONS)}={fuzz_word(rng, VALUES)}")
        else:
            groups.append(f"{rng.choice(OPTIONS)} {fuzz_word(rng, VALUES)}")
    rng.shuffle(groups)
    if rng.random() < 0.01:
        groups.append("x" * 20_000)
    return " ".join(groups)


def test_fuzz_slurm_train_and_tiers_lines_give_only_usage_errors(
        shell: Shell, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(SEED)
    rendered = refused = 0
    started = time.monotonic()
    for i in range(LINES):
        if rng.random() < 0.8:
            line, body = _train_line(rng), rng.choice(BODIES)
            what = f"line {i}: %%slurm_train {line[:300]!r} with body {body!r}"
            try:
                shell.magics.slurm_train(line, body)
                exc = None
            except BaseException as caught:
                exc = caught
            if isinstance(exc, UsageError):
                assert "\n" not in str(exc).strip(), f"{what}: the error is not one line: {exc}"
        else:
            line = fuzz_tiers_line(rng, VALUES)
            what = f"line {i}: %tiers {line!r}"
            try:
                shell.magics.tiers(line)
                exc = None
            except BaseException as caught:
                exc = caught
        printed = capsys.readouterr()
        check_fuzz_answer(what, exc, printed.out + printed.err, SECRETS, SECRETS[1:])
        rendered += exc is None and "#!/bin/bash" in printed.out
        refused += exc is not None
    assert rendered > LINES // 50, "the fuzz should also reach some successful dry runs"
    assert refused > LINES // 4, "the fuzz should also reach many refusals"
    assert shell.user_ns.get("__builtins__") is None
    print(f"{LINES} lines: {rendered} dry runs, {refused} UsageErrors, {time.monotonic() - started:.1f}s")


# --- tiers.yaml files ---------------------------------------------------------------------------

KEYS = ["tier", "host", "port", "user", "identity_file", "known_hosts", "proxy_jump", "ssh_config",
        "connect_timeout", "status_interval", "rank_interval", "workdir", "setup", "env", "defaults",
        "description", "context", "kubeconfig", "namespace", "service_type", "image_pull_secrets",
        "model_volume", "request_timeout", "bogus", "prt", 7, None]
DEFAULT_KEYS = ["nodes", "time", "mem", "partition", "gpus_per_node", "gpus-per-node", "sbatch_options",
                "launcher", "python", "image", "replicas", "port", "node_selector", "tolerations",
                "secret_env", "autoscale", "exclusive", "bogus"]
SCALARS: list[Any] = [
    "slurm", "local", "kubernetes", "k8s", "login.example", "-oProxyCommand=x", "h;id", "a b", "",
    "x\n", 0, -1, 1, 22, 65536, 10**30, 0.05, 1.5, float("nan"), float("inf"), True, None, "\x00",
    "ÜBER", "~/x", "$(id)", "01:00:00", "9" * 40, "gpu", "--hold", "ClusterIP", "demo", "Demo",
    "srun", "torchrun",
]


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth < 3 and roll < 0.15:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 3 and roll < 0.3:
        keys = [*DEFAULT_KEYS, "a", 1]
        return {rng.choice(keys): _value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    return rng.choice(SCALARS)


def _profile(rng: random.Random) -> Any:
    if rng.random() < 0.05:
        return _value(rng)
    prof: dict[Any, Any] = {}
    for _ in range(rng.randint(0, 6)):
        key = rng.choice(KEYS)
        if key == "env":
            value = rng.choice([PROFILE_SECRET, 1, [PROFILE_SECRET], {"k": PROFILE_SECRET}])
            prof[key] = {rng.choice(["TOKEN", "A B", "RANK", 3, "x"]): value}
        elif key == "defaults":
            prof[key] = {rng.choice(DEFAULT_KEYS): _value(rng) for _ in range(rng.randint(0, 4))}
        else:
            prof[key] = _value(rng)
    if rng.random() < 0.7:
        prof["tier"] = rng.choice(["slurm", "local", "kubernetes"])
    if prof.get("tier") == "slurm" and rng.random() < 0.7:
        prof["host"] = rng.choice(["login.example", "127.0.0.1", "-bad", "a b"])
    return prof


HOSTILE = [
    b"\xff\xfe\x00p\x00r\x00",  # UTF-16 with a BOM
    b"profiles:\n  p:\n    description: caf\xe9\n",
    b"a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    b"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    b"e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    b"profiles: {p: {tier: local, description: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]}}\n",
    b"profiles: " + b"[" * 3000 + b"]" * 3000,
    b"profiles: " + b"{a: " * 500 + b"1" + b"}" * 500,
    b"!!python/object/apply:os.system ['touch /tmp/jt-fuzz-pwned']\n",
    b"profiles:\n  p: !!binary aGVsbG8=\n",
    b"profiles:\n  ? [a, b]\n  : {tier: local}\n",
    b"\x00\x01\x02",
    b"profiles:\n\tp: {}\n",
    b"default_profile: [a]\nprofiles: {}\n",
    b"default_profile: nope\n",
    b"trust_project_config: yes-please\n",
]


def test_fuzz_config_files_give_only_config_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    home = tmp_path / "home"
    (home / ".jupyter").mkdir(parents=True)
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "no-etc.yaml")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(config.ENV_VAR, raising=False)
    monkeypatch.delenv(config.TRUST_ENV_VAR, raising=False)
    monkeypatch.setenv("JUPYTER_TIERS_REGISTRY", str(tmp_path / "registry.sqlite"))
    monkeypatch.chdir(project)
    rng = random.Random(SEED)
    loaded = refused = 0
    for i in range(CONFIGS):
        target = rng.choice([home / ".jupyter" / "tiers.yaml", project / "tiers.yaml"])
        user_file = home / ".jupyter" / "tiers.yaml"
        other = (project / "tiers.yaml") if target == user_file else user_file
        if rng.random() < 0.5:
            other.unlink(missing_ok=True)
        if rng.random() < 0.08:
            data = rng.choice(HOSTILE)
        else:
            doc: dict[Any, Any] = {"profiles": {rng.choice(["p", "q", "local", "-x", "a b", 5]): _profile(rng)
                                                for _ in range(rng.randint(0, 3))}}
            if rng.random() < 0.2:
                doc["default_profile"] = rng.choice(["p", "q", "local", "nope", 3])
            if rng.random() < 0.05:
                doc[rng.choice(["trust_project_config", "profile", "extra"])] = rng.choice([True, "x", 1])
            data = yaml.safe_dump(doc, allow_unicode=True).encode("utf-8", "surrogatepass")
        target.write_bytes(data)
        what = f"config {i} ({target.name} in {target.parent.name}): {data[:300]!r}"
        try:
            cfg = load_config()
            for name in cfg.profiles:
                profile = cfg.profile(name)
                if profile.tier in ("local", "slurm"):
                    with contextlib.suppress(TiersError):
                        api.make_tier(profile).make_spec("print(1)\n")
            loaded += 1
        except ConfigError as exc:
            refused += 1
            if isinstance(exc, ProjectFileRefused):  # one line per refused key (issue 26's allowlist)
                assert len(str(exc).splitlines()) == len(exc.refusals) + 2, f"{what}: {exc}"
            else:
                assert "\n" not in str(exc), f"{what}: the error is not one line: {exc}"
            assert len(str(exc)) < 2000, f"{what}: the error is too long"
            assert PROFILE_SECRET not in str(exc), f"{what}: the error shows an env value: {exc}"
        except Exception as exc:
            raise AssertionError(f"{what}: {type(exc).__name__}: {exc}") from exc
        finally:
            api.close_all()
    assert not Path("/tmp/jt-fuzz-pwned").exists()
    assert loaded > CONFIGS // 20 and refused > CONFIGS // 4, (loaded, refused)
