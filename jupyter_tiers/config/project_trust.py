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

Environment names are an allowlist too: :data:`PROJECT_ENV` names the tuning knobs a project file
may set (threads, NCCL's and PyTorch's settings, ...), each with what it tunes; every other name is
refused (:data:`REFUSED_ENV_NAMES` says what the well-known ones decide, for the refusal line).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["PROJECT_ENV", "PROJECT_KEYS", "EnvRule", "KeyRule", "project_env_allowed", "refused_env_decides",
           "rule", "slurm_env_name"]


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
        "replicas", "gpus", "cpu", "memory", "shm_size", "port", "readiness", "autoscale", "strategy",
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


# --- environment names ------------------------------------------------------------------------


@dataclass(frozen=True)
class EnvRule:
    """One environment name a project file may set, and what it tunes."""

    name: str
    tunes: str


def _env(tunes: str, *names: str) -> list[EnvRule]:
    return [EnvRule(n, tunes) for n in names]


# The names a project file may set: tuning knobs of code that runs anyway. None of them names a
# file, directory, library, plugin, program, host or credential (those are code, destinations or
# credentials in disguise: NCCL_DEBUG_FILE, CUDA_CACHE_PATH, TORCHINDUCTOR_CACHE_DIR, ... are
# refused). Compared exactly (environment names are case-sensitive; a lower-case spelling is
# another name and refused).
_ENV_TABLE: list[EnvRule] = [
    *_env("threads of OpenMP, BLAS and numerical libraries", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
          "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "NUMEXPR_MAX_THREADS",
          "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS", "NUMBA_NUM_THREADS", "RAYON_NUM_THREADS",
          "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"),
    *_env("how OpenMP threads are placed and wait", "OMP_PROC_BIND", "OMP_PLACES", "OMP_DYNAMIC",
          "OMP_WAIT_POLICY", "OMP_STACKSIZE", "OMP_MAX_ACTIVE_LEVELS", "OMP_SCHEDULE",
          "GOMP_SPINCOUNT", "KMP_AFFINITY", "KMP_BLOCKTIME", "KMP_SETTINGS", "MKL_DYNAMIC",
          "MKL_CBWR"),
    *_env("NCCL's log level and subsystems (to the job's log)", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS"),
    *_env("NCCL's algorithms, channels and buffers on the trusted fabric", "NCCL_ALGO", "NCCL_PROTO",
          "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_BUFFSIZE", "NCCL_NTHREADS",
          "NCCL_NSOCKS_PERTHREAD", "NCCL_SOCKET_NTHREADS", "NCCL_CROSS_NIC", "NCCL_NET_GDR_LEVEL",
          "NCCL_NET_GDR_READ", "NCCL_P2P_LEVEL", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE",
          "NCCL_IB_DISABLE", "NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT", "NCCL_NVLS_ENABLE",
          "NCCL_CUMEM_ENABLE", "NCCL_ASYNC_ERROR_HANDLING", "NCCL_BLOCKING_WAIT"),
    *_env("which of the node's network interfaces and adapters a collective uses",
          "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "GLOO_SOCKET_IFNAME"),
    *_env("torch.distributed's checks, timeouts and error handling", "TORCH_DISTRIBUTED_DEBUG",
          "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_BLOCKING_WAIT",
          "TORCH_NCCL_ENABLE_MONITORING", "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
          "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_AVOID_RECORD_STREAMS"),
    *_env("PyTorch's messages and checks", "TORCH_SHOW_CPP_STACKTRACES", "TORCH_CPP_LOG_LEVEL",
          "TORCH_LOGS", "TORCH_USE_CUDA_DSA", "TORCHDYNAMO_DISABLE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"),
    *_env("CUDA's and cuBLAS's scheduling, allocation and determinism", "CUDA_LAUNCH_BLOCKING",
          "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_MODULE_LOADING", "CUDA_CACHE_DISABLE",
          "CUBLAS_WORKSPACE_CONFIG", "PYTORCH_CUDA_ALLOC_CONF", "NVIDIA_TF32_OVERRIDE"),
    *_env("Python's hash seed and fault handler", "PYTHONHASHSEED", "PYTHONFAULTHANDLER"),
    *_env("tokenizers' and Hugging Face's parallelism, offline mode and telemetry (only fewer "
          "destinations)", "TOKENIZERS_PARALLELISM", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
          "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY", "HF_HUB_DISABLE_PROGRESS_BARS",
          "TRANSFORMERS_VERBOSITY", "DATASETS_VERBOSITY", "DO_NOT_TRACK"),
    *_env("vLLM's KV-cache size, log level, worker start method and usage reports (off)",
          "VLLM_CPU_KVCACHE_SPACE", "VLLM_LOGGING_LEVEL", "VLLM_WORKER_MULTIPROC_METHOD",
          "VLLM_NO_USAGE_STATS"),
    *_env("TensorFlow's and JAX's log level, memory use and platform", "TF_CPP_MIN_LOG_LEVEL",
          "TF_ENABLE_ONEDNN_OPTS", "TF_FORCE_GPU_ALLOW_GROWTH", "XLA_PYTHON_CLIENT_PREALLOCATE",
          "XLA_PYTHON_CLIENT_MEM_FRACTION", "JAX_PLATFORMS", "JAX_ENABLE_X64"),
    *_env("the C library's memory allocator", "MALLOC_ARENA_MAX", "MALLOC_TRIM_THRESHOLD_",
          "MALLOC_MMAP_THRESHOLD_"),
]

#: Every environment name a project file may set, with what it tunes. Any other name from a
#: project file is refused (the opt-in on the last line), so a new knob is refused until someone
#: adds a row on purpose; docs/security.md's table is generated from this one.
PROJECT_ENV: Mapping[str, EnvRule] = MappingProxyType({r.name: r for r in _ENV_TABLE})
assert len(PROJECT_ENV) == len(_ENV_TABLE), "an environment name has two rows"

# Names known to choose code, destinations or credentials, with what each decides: not the rule
# (any name that is not in PROJECT_ENV is refused) but the reason a refusal gives, and the list a
# test checks the allowlist against (no name is in both). Exact names, then prefixes.
_CODE = "which code runs"
_DEST = "where files, requests or results go"
_CRED = "which credentials are used"
_SLURM = "how Slurm runs the job (Slurm reads it as an option); set the profile's defaults instead"
REFUSED_ENV_NAMES: Mapping[str, str] = MappingProxyType({
    **dict.fromkeys((
        "PATH", "HOME", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "IFS", "PROMPT_COMMAND",
        "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "GCONV_PATH", "LOCPATH",
        "PERL5LIB", "PERLLIB", "PERL5OPT", "RUBYLIB", "RUBYOPT", "NODE_OPTIONS", "NODE_PATH",
        "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS", "CLASSPATH", "LUA_INIT",
        "LUA_PATH", "LUA_CPATH", "R_PROFILE", "R_PROFILE_USER", "R_ENVIRON", "R_ENVIRON_USER",
        "R_LIBS", "R_LIBS_USER", "R_LIBS_SITE", "TCLLIBPATH", "JULIA_LOAD_PATH", "JULIA_DEPOT_PATH",
        "GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXEC_PATH", "GIT_ASKPASS", "SSH_ASKPASS",
        "SUDO_ASKPASS", "GIT_PROXY_COMMAND", "GIT_TEMPLATE_DIR", "GIT_EXTERNAL_DIFF", "LESSOPEN",
        "LESSCLOSE", "EDITOR", "VISUAL", "PAGER", "BROWSER", "OPENSSL_CONF", "OPENSSL_MODULES",
        "OPENSSL_ENGINES", "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH",
        "OMP_TOOL_LIBRARIES", "OMP_TOOL", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR",
        "TORCH_EXTENSIONS_DIR", "CC", "CXX", "LD", "CUDA_HOME", "CUDA_PATH", "CUDA_CACHE_PATH",
        "JUPYTER_CONFIG_DIR", "JUPYTER_PATH", "JUPYTER_DATA_DIR", "IPYTHONDIR", "MPLCONFIGDIR",
        "NCCL_CONF_FILE", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN",
        "NCCL_TOPO_FILE", "HF_HOME", "HF_HUB_CACHE", "HF_MODULES_CACHE", "TRANSFORMERS_CACHE",
        "TORCH_HOME", "HF_HUB_ENABLE_HF_TRANSFER", "PYTHONWARNINGS"), _CODE),
    **dict.fromkeys((
        "HF_ENDPOINT", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "HOSTALIASES",
        "RES_OPTIONS", "LOCALDOMAIN", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE", "NCCL_DEBUG_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TMPDIR",
        "CUDA_VISIBLE_DEVICES"), _DEST),
    **dict.fromkeys((
        "KRB5CCNAME", "KRB5_CONFIG", "SSH_AUTH_SOCK", "GOOGLE_APPLICATION_CREDENTIALS",
        "BOTO_CONFIG", "NETRC", "DOCKER_CONFIG", "KUBECONFIG", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
        "HF_TOKEN_PATH"), _CRED),
})
REFUSED_ENV_PREFIXES: Mapping[str, str] = MappingProxyType({
    "LD_": _CODE, "DYLD_": _CODE, "PYTHON": _CODE, "BASH_FUNC_": _CODE, "GIT_CONFIG": _CODE,
    "PIP_": _CODE, "UV_": _CODE, "CONDA": _CODE, "AWS_": _CRED, "AZURE_": _CRED,
    "GOOGLE_": _CRED, "MLFLOW_": _DEST, "WANDB_": _DEST, "COMET_": _DEST, "NEPTUNE_": _DEST,
    "SBATCH_": _SLURM, "SALLOC_": _SLURM, "SRUN_": _SLURM, "SLURM_": _SLURM, "SLURMD_": _SLURM,
    "SCANCEL_": _SLURM, "SQUEUE_": _SLURM, "SACCT_": _SLURM,
})
assert not set(PROJECT_ENV) & set(REFUSED_ENV_NAMES), "a name is both allowed and refused"

#: Prefixes Slurm's own commands read as their options. Reserved on every path, from any file and
#: ``--env``: never in env.sh, never in the environment of a Slurm command (a profile's options
#: reach sbatch as command-line options through its ``defaults``).
SLURM_ENV_PREFIXES = ("SBATCH_", "SALLOC_", "SRUN_", "SLURM_", "SLURMD_", "SCANCEL_", "SQUEUE_",
                      "SACCT_")


def project_env_allowed(name: str) -> bool:
    """Whether a project file may set environment variable ``name``: only a name of
    :data:`PROJECT_ENV` (exact spelling)."""
    return name in PROJECT_ENV


def refused_env_decides(name: str) -> str:
    """What environment name ``name`` decides, for a refusal line: the known reason, else that
    it is not on the allowlist."""
    upper = name.upper()
    known = REFUSED_ENV_NAMES.get(upper)
    if known is None:
        known = next((why for prefix, why in REFUSED_ENV_PREFIXES.items() if upper.startswith(prefix)),
                     None)
    if known is None and upper.startswith("NCCL_") and "PLUGIN" in upper:
        known = _CODE
    if known is not None:
        return f"decides {known}"
    return ("is not on the project-file environment allowlist (names that only tune threads, NCCL, "
            "PyTorch, CUDA: docs/security.md)")


def slurm_env_name(name: str) -> bool:
    """Whether ``name`` is one Slurm's commands read as an option (:data:`SLURM_ENV_PREFIXES`)."""
    return name.upper().startswith(SLURM_ENV_PREFIXES)
