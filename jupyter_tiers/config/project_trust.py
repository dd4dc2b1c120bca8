"""Pure: what a project ``./tiers.yaml`` may set, as one declared table (the allowlist).

A ``./tiers.yaml`` that sits in the working directory may have come with a cloned repository. It
may choose among the trusted cluster's own resources (nodes, tasks, GPUs, partition, time,
replicas, CPU and memory, a port, names, metric patterns, a readiness path); it never chooses
code, destinations, exposure or credentials. :data:`PROJECT_KEYS` says, for every profile key
and every ``defaults`` key, whether a project file may set it on a profile a trusted layer (or
jupyter-tiers itself) defines and on a profile the project file defines itself, and for a key it
may not set, what the key decides. A key that is in no row is refused like a refused one, so a new
option is refused from project files until someone adds a row on purpose; a unit test fails when
an option or profile key has no row. config/profiles.py's refusals, docs/security.md's table and the
profile reference are generated from this table.

Environment names: ``env`` is allowed, but not a name that loads code or picks a destination
(:func:`hijacking_env_name`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["PROJECT_KEYS", "KeyRule", "hijacking_env_name", "rule"]


@dataclass(frozen=True)
class KeyRule:
    """One row: ``key`` (``defaults.KEY`` for a key of ``defaults``), whether a project file may
    set it on a trusted profile (``on_trusted``) and on a profile it defines (``on_own``), and
    ``decides``: what the key chooses (the refusal says it; for an allowed key, why it is safe)."""

    key: str
    on_trusted: bool
    on_own: bool
    decides: str


# What the refused keys decide (each refusal line says "decides ...").
WHERE = "where it runs"
CODE = "which code runs"
FILES = "where files go"
CREDS = "where files and credentials go"
SECRETS = "where secrets go"
EXPOSURE = "who can reach it"
LOAD = "how hard a load test may hit a service"
TIMING = "how this machine polls and believes the cluster"
RESOURCE = "a resource of the trusted cluster"


def _rows(on_trusted: bool, on_own: bool, decides: str, *keys: str) -> list[KeyRule]:
    return [KeyRule(k, on_trusted, on_own, decides) for k in keys]


_TABLE: list[KeyRule] = [
    # --- profile keys -------------------------------------------------------------------------
    *_rows(True, True, "a label", "description"),
    # env and defaults are containers: their own keys have rows (defaults.*) or a rule (env names).
    *_rows(True, True, "containers checked key by key", "env", "defaults"),
    # The tier of a trusted profile is where it runs; a project's own profile must name one
    # (kubernetes is refused there: it would use your kubeconfig's credentials).
    KeyRule("tier", False, True, WHERE),
    # A project's own Slurm profile may name its host (a job goes there only when a notebook names
    # the profile); never with your keys, jump hosts or ssh_config.
    *_rows(False, True, WHERE, "host", "port", "user"),
    *_rows(False, False, WHERE, "identity_file", "known_hosts", "proxy_jump", "context", "namespace"),
    *_rows(False, False, CODE, "ssh_config", "kubeconfig", "setup", "fetch_image"),
    *_rows(False, False, FILES, "workdir", "path_map", "model_volume", "storage_class", "sync_max_mb"),
    KeyRule("object_store", False, False, CREDS),
    KeyRule("image_pull_secrets", False, False, SECRETS),
    *_rows(False, False, EXPOSURE, "service_type", "ingress_class", "ingress_annotations"),
    KeyRule("load_limit_rps", False, False, LOAD),
    *_rows(False, False, TIMING, "connect_timeout", "status_interval", "rank_interval",
           "request_timeout", "stale_after", "hang_after"),
    # --- defaults: the spec options a profile presets (options.py) ----------------------------
    *_rows(True, True, RESOURCE, *(f"defaults.{k}" for k in (
        "nodes", "ntasks_per_node", "gpus_per_node", "cpus_per_task", "mem", "time", "partition",
        "account", "qos", "constraint", "exclusive", "requeue", "signal", "switches", "launcher",
        "nproc_per_node", "metrics",
        "replicas", "gpus", "cpu", "memory", "port", "readiness", "autoscale", "strategy",
        "image_pull_policy", "node_selector", "tolerations"))),
    *_rows(False, False, CODE, "defaults.python", "defaults.image", "defaults.sbatch_options"),
    *_rows(False, False, FILES, "defaults.checkpoint_dir", "defaults.sync"),
    KeyRule("defaults.checkpoint_to", False, False, CREDS),
    KeyRule("defaults.secret_env", False, False, SECRETS),
]

#: Every row by key. A key with no row is refused from a project file (see the module docstring).
PROJECT_KEYS: Mapping[str, KeyRule] = MappingProxyType({r.key: r for r in _TABLE})
assert len(PROJECT_KEYS) == len(_TABLE), "a key has two rows"

_UNLISTED = KeyRule("", False, False, "something no row of the project-file allowlist names")


def rule(key: str) -> KeyRule:
    """The row of ``key`` (``defaults.KEY`` for a default); an unlisted key is refused."""
    return PROJECT_KEYS.get(key) or KeyRule(key, False, False, _UNLISTED.decides)


# Environment names a project file may not set in any profile without the opt-in. Each makes a
# loader, interpreter or shell load code it names, decides which program a command runs, or picks
# where downloads, requests, uploads and credentials go, in every process of the job
# (jupyter-tiers' own wrappers, supervisors, torchrun and the checkpoint uploader included), so it
# is a command key in disguise. Compared upper-cased (curl and requests read http_proxy too).
# Exact names, then prefixes (``LD_`` is ``LD_*``).
HIJACKING_ENV_NAMES = frozenset({
    # shells and program lookup: startup files, exported options, the search path, ~ itself
    # (~/.bashrc, ~/.local's site-packages), where programs read their configuration
    "PATH", "HOME", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "IFS", "PROMPT_COMMAND",
    "XDG_CONFIG_HOME",
    # the C library's loadable modules (iconv)
    "GCONV_PATH",
    # other interpreters' module paths and startup options
    "PERL5LIB", "PERLLIB", "PERL5OPT", "RUBYLIB", "RUBYOPT", "NODE_OPTIONS", "NODE_PATH",
    "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS", "CLASSPATH", "LUA_INIT", "LUA_PATH",
    "LUA_CPATH", "R_PROFILE", "R_PROFILE_USER", "R_ENVIRON", "R_ENVIRON_USER", "TCLLIBPATH",
    # programs that tools run for their own purposes (git's ssh, proxies, hooks and helpers,
    # password prompts)
    "GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXEC_PATH", "GIT_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS",
    "GIT_PROXY_COMMAND", "GIT_TEMPLATE_DIR",
    # where downloads come from and requests go, and whose certificates are believed
    "HF_ENDPOINT", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE",
    "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    # where models and code come from: the Hugging Face caches hold remote code that
    # trust_remote_code models import, so a cache the project chose is code it chose
    "HF_HOME", "HF_HUB_CACHE", "HF_MODULES_CACHE", "TRANSFORMERS_CACHE", "TORCH_HOME",
    # where metrics, artifacts and credentials are sent (boto's config names a credential process)
    "BOTO_CONFIG", "WANDB_BASE_URL", "MLFLOW_TRACKING_URI",
})
HIJACKING_ENV_PREFIXES = (
    "LD_", "DYLD_",  # the dynamic loader: LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, macOS's DYLD_*
    "PYTHON",  # PYTHONPATH, PYTHONSTARTUP, PYTHONHOME, PYTHONUSERBASE, PYTHONBREAKPOINT, ...
    "BASH_FUNC_",  # exported shell functions
    "GIT_CONFIG",  # git configuration from the environment (core.sshCommand, ...)
    "PIP_", "UV_", "CONDA",  # package installers: index URLs, config files
    # the AWS SDKs: endpoints, credentials, config files whose credential_process runs a command
    "AWS_",
    "MLFLOW_", "WANDB_",  # experiment trackers: where runs, artifacts and API keys are sent
)


def hijacking_env_name(name: str) -> bool:
    """Whether a project file may not set environment variable ``name`` (see
    :data:`HIJACKING_ENV_NAMES`): it would choose code or destinations for every process."""
    upper = name.upper()
    # NCCL loads plugins by name (NCCL_NET_PLUGIN, NCCL_TUNER_PLUGIN, ...: a .so) and reads further
    # settings from NCCL_CONF_FILE; its other settings (NCCL_DEBUG, NCCL_IB_HCA) only tune the
    # trusted fabric, so templates keep them.
    nccl_loads = upper.startswith("NCCL_") and ("PLUGIN" in upper or upper == "NCCL_CONF_FILE")
    return upper in HIJACKING_ENV_NAMES or upper.startswith(HIJACKING_ENV_PREFIXES) or nccl_loads
