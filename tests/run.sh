#!/usr/bin/env bash
# The whole test suite from a fresh machine: venv + packages, torch (CPU), the Slurm-in-a-box
# cluster (Debian packages, munge, MariaDB+slurmdbd, slurmctld, 4 slurmd, sshd on loopback),
# Debian's chromium for the browser tests, lint and types, then pytest (the Kubernetes tests start
# their own API emulator from tests/k8s_emulator). Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
mkdir -p test-output

source tests/bootstrap.sh
if ! "$PY" -c "import torch" 2>/dev/null; then
  echo "[run] installing torch 2.13.0 (CPU build) and numpy for the multi-rank tests"
  "$PY" -m pip install -q torch==2.13.0 numpy
fi

# The Kubernetes emulator's kubelet runs each pod in its own network namespace (unshare/nsenter
# from util-linux, ip from iproute2).
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null && ! { command -v ip && command -v nsenter; } >/dev/null; then
  echo "[run] installing iproute2 and util-linux for the Kubernetes emulator's pods"
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q iproute2 util-linux; } \
    >test-output/apt-netns.log 2>&1 </dev/null \
    || { tail -n 20 test-output/apt-netns.log >&2; echo "[run] iproute2 install failed" >&2; exit 1; }
fi

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null && [ ! -x /usr/bin/chromium ]; then
  echo "[run] installing Debian's chromium for the browser tests"
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; } \
    >test-output/apt-chromium.log 2>&1 </dev/null \
    || { tail -n 20 test-output/apt-chromium.log >&2; echo "[run] chromium install failed" >&2; exit 1; }
fi

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  echo "[run] starting the Slurm test cluster"
  bash jupyter_tiers/sandbox/cluster.sh up
  echo "[run] starting its second sshd (key, then a one-time code; installs libpam-google-authenticator)"
  bash jupyter_tiers/sandbox/twofactor.sh up
else
  echo "[run] WARNING: not root or no apt-get: the Slurm cluster cannot be started;" \
       "cluster tests will be SKIPPED (in CI they fail instead)" >&2
fi

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null && ! command -v shellcheck >/dev/null; then
  echo "[run] installing shellcheck for the cluster script"
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q shellcheck; } \
    >test-output/apt-shellcheck.log 2>&1 </dev/null \
    || { tail -n 20 test-output/apt-shellcheck.log >&2; echo "[run] shellcheck install failed" >&2; exit 1; }
fi
if command -v shellcheck >/dev/null; then
  echo "[run] shellcheck cluster.sh (no repository-wide exceptions)"
  shellcheck jupyter_tiers/sandbox/cluster.sh
elif [ -n "${CI:-}" ]; then
  echo "[run] shellcheck is missing: cluster.sh cannot be checked" >&2; exit 1
else
  echo "[run] WARNING: shellcheck missing (no root or apt-get): cluster.sh NOT checked" >&2
fi

echo "[run] ruff"
"$PY" -m ruff check .
echo "[run] mypy"
"$PY" -m mypy
echo "[run] import layers (lint-imports: the [tool.importlinter] contracts in pyproject.toml)"
"$(dirname "$PY")/lint-imports" --no-cache
if command -v node >/dev/null; then
  echo "[run] labextension unit tests (vitest)"
  ( cd labextension && PATH="$(dirname "$PY"):$PATH" jlpm test )
elif [ -n "${CI:-}" ]; then
  echo "[run] node is missing: the labextension cannot be built or tested" >&2; exit 1
else
  echo "[run] WARNING: node is missing: labextension unit tests SKIPPED" >&2
fi
echo "[run] pytest"
"$PY" -m pytest -p no:cacheprovider "$@"
