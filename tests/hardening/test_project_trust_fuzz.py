"""Issue 26, part 5: a seeded fuzz of random project ./tiers.yaml files over the whole key space
(every row of the allowlist, keys no row names, environment names that load code). Each file is
loaded as the real magics load it; when it is accepted, every profile it touched is rendered with
the real renderers: the sbatch script (slurm/render.py through SlurmTier.render), the local tier's
batch command and serving plan, the Kubernetes manifests (k8s/render.py through K8sTier.render)
and the checkpoint upload plan (checkpoint_upload.plan_upload). Every value carries a marker; no
marker of a key the allowlist refuses for that profile may appear in any of them."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from jupyter_tiers import api
from jupyter_tiers.batch.jobdir import render_env
from jupyter_tiers.config import cache as config_cache
from jupyter_tiers.config import profiles as config
from jupyter_tiers.config import project_trust
from jupyter_tiers.config.profiles import ConfigError, load_config
from jupyter_tiers.config.project_trust import rule
from jupyter_tiers.core.errors import TiersError
from jupyter_tiers.core.model import WorkKind
from jupyter_tiers.core.record import JobRecord
from jupyter_tiers.data.checkpoint_upload import plan_upload
from jupyter_tiers.data.handoff import encode_detail
from jupyter_tiers.transport.local import LocalTransport

SEED = 2026
FILES = 600

USER = """
profiles:
  hpc:
    tier: slurm
    host: login.example
    workdir: /trusted/wd
    object_store: {bucket: trusted-bucket, endpoint_url: "https://s3.trusted.example"}
    defaults: {python: /trusted/py, partition: tp, checkpoint_to: "s3://trusted-bucket/ck"}
  serving:
    tier: kubernetes
    namespace: team
    defaults: {image: "trusted/img:1"}
"""

# One valid value per key, "{m}" replaced by the value's marker (lower-case letters and digits, so
# it passes the validators that take names).
VALUES: dict[str, Any] = {
    "tier": ["slurm", "local", "kubernetes"],
    "description": "d{m}", "host": "h{m}.example", "port": 2222, "user": "u{m}",
    "identity_file": "/k/{m}", "known_hosts": "/kh/{m}", "proxy_jump": "j{m}.example",
    "ssh_config": "/s/{m}", "kubeconfig": "/kc/{m}", "context": "c{m}", "namespace": "n{m}",
    "service_type": "NodePort", "ingress_class": "ic{m}", "ingress_annotations": {"a.example/{m}": "v{m}"},
    "image_pull_secrets": ["s{m}"], "storage_class": "sc{m}", "model_volume": {"pvc": "v{m}"},
    "fetch_image": "f{m}/img:1", "request_timeout": 30, "load_limit_rps": 5, "stale_after": 60,
    "connect_timeout": 5, "status_interval": 5, "rank_interval": 1, "workdir": "/w/{m}",
    "setup": ["echo {m}"], "object_store": {"bucket": "b{m}", "endpoint_url": "https://{m}.example"},
    "sync_max_mb": 10, "path_map": {"/scratch": "/p/{m}"},
    "defaults.nodes": 2, "defaults.ntasks_per_node": 2, "defaults.gpus_per_node": 1,
    "defaults.cpus_per_task": 2, "defaults.mem": "4G", "defaults.time": "00:10:00",
    "defaults.partition": "p{m}", "defaults.account": "a{m}", "defaults.qos": "q{m}",
    "defaults.constraint": "c{m}", "defaults.exclusive": True, "defaults.requeue": True,
    "defaults.signal": "USR1@60", "defaults.switches": "1", "defaults.launcher": "srun",
    "defaults.nproc_per_node": 2, "defaults.metrics": {"m{m}": "m{m}=([0-9.]+)"},
    "defaults.python": "/py/{m}", "defaults.sbatch_options": ["--comment={m}"],
    "defaults.checkpoint_dir": "/cd/{m}", "defaults.checkpoint_to": "s3://b{m}/loot",
    "defaults.sync": ["./s{m}"], "defaults.image": "i{m}/x:1", "defaults.replicas": 2,
    "defaults.gpus": 1, "defaults.cpu": "500m", "defaults.memory": "1Gi", "defaults.port": 8123,
    "defaults.secret_env": {"X{m}": "sec{m}/key"}, "defaults.readiness": "/r{m}",
    "defaults.autoscale": "1:3", "defaults.strategy": "rolling", "defaults.image_pull_policy": "Always",
    "defaults.node_selector": ["k{m}=v"], "defaults.tolerations": [{"key": "t{m}", "operator": "Exists"}],
    "defaults.unlisted_option": "u{m}", "unlisted_key": "u{m}",
}
# Issue 36 item 8: names on the allowlist, names nobody classified (random ones with "{m}"), the
# review's names, Slurm's own prefixes, odd cases.
ENV_NAMES = ["V{m}", "LD_PRELOAD", "AWS_ENDPOINT_URL", "PYTHONPATH", "NCCL_NET_PLUGIN", "HF_HOME",
             "OMP_NUM_THREADS", "WANDB_BASE_URL", "GIT_PROXY_COMMAND", "OPENSSL_CONF",
             "CUDA_INJECTION64_PATH", "XDG_CACHE_HOME", "SSH_AUTH_SOCK", "HOSTALIASES", "KRB5CCNAME",
             "SBATCH_EXPORT", "SBATCH_{m}", "SRUN_EXPORT_ENV", "SRUN_{m}", "SALLOC_{m}", "SLURM_{m}",
             "sbatch_export", "Omp_Num_Threads", "nccl_debug", "_{m}", "X{m}_PATH",
             *sorted(project_trust.PROJECT_ENV)]
NAMES = ["hpc", "serving", "local", "course", "laptop"]


def _fill(value: Any, m: str) -> Any:
    if isinstance(value, str):
        return value.replace("{m}", m)
    if isinstance(value, list):
        return [_fill(v, m) for v in value]
    if isinstance(value, dict):
        return {_fill(k, m): _fill(v, m) for k, v in value.items()}
    return value


def _project_file(rng: random.Random, i: int) -> tuple[dict[str, Any], dict[str, tuple[str, str]]]:
    """A random project file and its markers: marker -> (profile, key)."""
    markers: dict[str, tuple[str, str]] = {}
    profiles: dict[str, dict[str, Any]] = {}
    for _ in range(rng.randint(1, 3)):
        name = rng.choice(NAMES)
        prof = profiles.setdefault(name, {})
        if name in ("course", "laptop"):
            prof["tier"] = rng.choice(["slurm", "local"])
            if prof["tier"] == "slurm":
                prof["host"] = "course.example"
        for _ in range(rng.randint(1, 3)):
            m = f"zq{i}x{len(markers)}"
            if rng.random() < 0.15:
                env_name = _fill(rng.choice(ENV_NAMES), m)
                prof.setdefault("env", {})[env_name] = f"/e/{m}"
                markers[m] = (name, f"env.{env_name}")
                continue
            # mostly keys the allowlist allows here, so that many files are accepted and rendered
            allowed = [k for k in sorted(VALUES) if k != "tier" and not _refused_for(name, k)]
            key = rng.choice(allowed if rng.random() < 0.85 else sorted(VALUES))
            value = VALUES[key]
            value = _fill(rng.choice(value) if key == "tier" else value, m)
            head, _, sub = key.partition(".")
            if head == "defaults":
                prof.setdefault("defaults", {})[sub] = value
            else:
                prof[key] = value
            markers[m] = (name, key)
    doc: dict[str, Any] = {"profiles": profiles}
    if rng.random() < 0.2:
        doc["default_profile"] = rng.choice(NAMES)
    return doc, markers


def _refused_for(name: str, key: str) -> bool:
    """Whether the allowlist refuses ``key`` on profile ``name`` from a project file."""
    own = name in ("course", "laptop")
    if key.startswith("env."):
        return not project_trust.project_env_allowed(key[4:])
    row = rule(key)
    return not (row.on_own if own else row.on_trusted)


def _rendered(profile: config.Profile) -> list[str]:
    """Everything the real renderers make of ``profile`` with its defaults."""
    out: list[str] = []
    if profile.tier in ("slurm", "local"):
        tier = api.make_tier(profile)
        spec = tier.make_spec("print(1)\n")
        out.append(tier.render(spec))
        out.append(render_env(spec))  # env.sh, which every rank sources before the launch line
        if spec.checkpoint_to:
            record = JobRecord(profile=profile.name, tier=profile.tier, job_id="7", name=spec.name,
                               state="COMPLETED", spec={"checkpoint_to": spec.checkpoint_to},
                               detail=encode_detail("/ck", "/ck/step-1"))
            out.append(repr(plan_upload(profile, record)))
    if profile.tier in ("local", "kubernetes"):
        serve = api.make_tier(profile, kind=WorkKind.SERVICE)
        sspec = serve.make_spec("print(1)\n", **({"image": "python:3.12"} if profile.tier == "kubernetes"
                                                  and "image" not in profile.defaults else {}))
        out.append(serve.render(sspec))
    out.append(repr(profile))  # what the tier reads its settings from
    if profile.tier == "slurm" and not profile.get("host"):  # the Slurm commands run on this machine
        out.append(repr(sorted(LocalTransport(environ={"PATH": "/usr/bin"}).env().items())))
    return out


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    user = tmp_path / "home" / ".jupyter" / "tiers.yaml"
    user.parent.mkdir(parents=True)
    user.write_text(USER, encoding="utf-8")
    (tmp_path / "project").mkdir()
    monkeypatch.setattr(config, "SYSTEM_PATH", tmp_path / "no-etc" / "tiers.yaml")
    monkeypatch.setattr(config, "USER_PATH", user)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv(config.ENV_VAR, raising=False)
    monkeypatch.delenv(config.TRUST_ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path / "project")
    return tmp_path


def test_nothing_outside_the_allowlist_reaches_a_script_manifest_upload_plan_or_command(home: Path) -> None:
    rng = random.Random(SEED)
    accepted = refused = reached = 0
    for i in range(FILES):
        doc, markers = _project_file(rng, i)
        (Path.cwd() / "tiers.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
        config_cache.clear()
        try:
            cfg = load_config()
        except ConfigError:
            refused += 1
            continue
        accepted += 1
        texts: list[str] = []
        for name in doc["profiles"]:
            try:
                texts += _rendered(cfg.profile(name))
            except TiersError:  # a spec the tier refuses (e.g. a key of the other kind of work)
                continue
            finally:
                api.close_all()
        everything = "\n".join(texts)
        leaked = [(m, where) for m, where in markers.items() if _refused_for(*where) and m in everything]
        assert not leaked, f"file {i}: {doc}: refused keys reached a rendering: {leaked}"
        reached += any(m in everything for m in markers)
    print(f"{FILES} project files: {refused} refused, {accepted} accepted, {reached} reached a rendering")
    # the fuzz means something: both outcomes are common, and allowed values do reach renderings
    assert refused > FILES // 4 and accepted > FILES // 10 and reached > FILES // 20, \
        (refused, accepted, reached)
