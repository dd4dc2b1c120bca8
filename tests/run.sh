#!/usr/bin/env bash
# The whole test suite from a fresh machine: venv + packages, torch (CPU), the Slurm-in-a-box
# cluster (Debian packages, munge, MariaDB+slurmdbd, slurmctld, 4 slurmd, sshd on loopback),
# Debian's chromium for the browser tests, lint and types, then pytest (the Kubernetes tests start
# their own API emulator from tests/k8s_emulator). Extra arguments go to pytest.
#
#   bash tests/run.sh --fast [PYTEST ARGS]   the inner loop: venv (bootstrap), ruff, mypy and every
#                                            test that needs no environment (pytest --fast): no root,
#                                            cluster, apt, torch, Node build, server or browser
#   bash tests/run.sh --docs                 the docs site alone (docs/_build/html): Sphinx with
#                                            warnings as errors, then its internal links checked
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
mkdir -p test-output

FAST=0
if [ "${1:-}" = "--fast" ]; then FAST=1; shift; fi
DOCS_ONLY=0
if [ "${1:-}" = "--docs" ]; then DOCS_ONLY=1; shift; fi

# Seconds per phase, printed at the end (with pytest's own time-by-group table above it).
PHASES=()
phase_start=$SECONDS
phase() {  # phase NAME: the time since the previous call was NAME's
    PHASES+=("$(printf '%-34s %6d s' "$1" $((SECONDS - phase_start)))")
    phase_start=$SECONDS
}
print_phases() {
    echo "[run] time by phase:"
    printf '  %s\n' "${PHASES[@]}"
    printf '  %-34s %6d s\n' "total" "$SECONDS"
}

# The docs (docs/, Sphinx + MyST + myst-nb): warnings are errors, every internal link must lead
# somewhere; offline, no notebook executed (the ones tests/examples saved are rendered).
build_docs() {
  echo "[run] docs: sphinx -W, then the internal links (docs/_build/html)"
  "$PY" docs/_tools/build_docs.py docs/_build/html
}

if [ "$DOCS_ONLY" = 1 ]; then
  JT_NO_LABEXTENSION=1 source tests/bootstrap.sh
  phase "venv (bootstrap)"
  status=0
  build_docs || status=$?
  phase "docs"
  print_phases
  exit "$status"
fi

if [ "$FAST" = 1 ]; then
  JT_NO_LABEXTENSION=1 source tests/bootstrap.sh
  phase "venv (bootstrap)"
  echo "[run] ruff"
  "$PY" -m ruff check .
  phase "ruff"
  echo "[run] mypy"
  "$PY" -m mypy
  phase "mypy"
  echo "[run] pytest --fast (tests that need no cluster, sshd, emulator, browser or local processes)"
  status=0
  "$PY" -m pytest -p no:cacheprovider --fast "$@" || status=$?
  phase "pytest --fast"
  print_phases
  exit "$status"
fi

source tests/bootstrap.sh
phase "venv (bootstrap)"
if ! "$PY" -c "import torch" 2>/dev/null; then
  echo "[run] installing torch 2.13.0 (CPU build) and numpy for the multi-rank tests"
  "$PY" -m pip install -q torch==2.13.0 numpy
fi

# Debian packages the tests use, installed with one apt-get update (each was its own):
# the Kubernetes emulator's kubelet runs each pod in its own network namespace (unshare/nsenter
# from util-linux, ip from iproute2); tests/chaos/test_chaos_clock.py steps the wall clock of a
# kernel and its job under libfaketime (never the machine's), with a small sleep shim it compiles
# (gcc); the browser tests drive Debian's chromium; shellcheck checks the cluster script.
apt_wanted=()
{ command -v ip && command -v nsenter; } >/dev/null || apt_wanted+=(iproute2 util-linux)
{ [ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] && command -v gcc >/dev/null; } \
  || apt_wanted+=(faketime gcc libc6-dev)
[ -x /usr/bin/chromium ] || apt_wanted+=(chromium)
command -v shellcheck >/dev/null || apt_wanted+=(shellcheck)
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null && [ "${#apt_wanted[@]}" -gt 0 ]; then
  echo "[run] installing ${apt_wanted[*]}"
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${apt_wanted[@]}"; } \
    >test-output/apt-tests.log 2>&1 </dev/null \
    || { tail -n 20 test-output/apt-tests.log >&2; echo "[run] apt-get install failed" >&2; exit 1; }
fi

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  echo "[run] starting the Slurm test cluster"
  bash jupyter_tiers/tools/sandbox/cluster.sh up
  echo "[run] starting its second sshd (key, then a one-time code; installs libpam-google-authenticator)"
  bash jupyter_tiers/tools/sandbox/twofactor.sh up
else
  echo "[run] WARNING: not root or no apt-get: the Slurm cluster cannot be started;" \
       "cluster tests will be SKIPPED (in CI they fail instead)" >&2
fi

# The class's hub (tests/browser/test_class_hub.py) runs configurable-http-proxy from npm, installed
# once under the hub's proxy directory (/var/lib/jupyter-tiers-hub-proxy) and kept: a pinned
# version already there is not fetched again.
if [ "$(id -u)" = "0" ] && command -v npm >/dev/null; then
  echo "[run] configurable-http-proxy for the class's hub (npm, kept once installed)"
  "$PY" -c 'from jupyter_tiers.tools.sandbox import hub; hub.ensure_proxy()'
elif [ -n "${CI:-}" ]; then
  echo "[run] npm is missing or not root: the class's hub proxy cannot be installed" >&2; exit 1
fi

if command -v shellcheck >/dev/null; then
  echo "[run] shellcheck cluster.sh (no repository-wide exceptions)"
  shellcheck jupyter_tiers/tools/sandbox/cluster.sh
elif [ -n "${CI:-}" ]; then
  echo "[run] shellcheck is missing: cluster.sh cannot be checked" >&2; exit 1
else
  echo "[run] WARNING: shellcheck missing (no root or apt-get): cluster.sh NOT checked" >&2
fi

phase "torch, apt, cluster, shellcheck"

echo "[run] ruff"
"$PY" -m ruff check .
echo "[run] mypy"
"$PY" -m mypy
echo "[run] import layers (lint-imports: the [tool.importlinter] contracts in pyproject.toml)"
"$(dirname "$PY")/lint-imports" --no-cache
phase "ruff, mypy, import layers"
if command -v node >/dev/null; then
  echo "[run] labextension unit tests (vitest)"
  ( cd labextension && PATH="$(dirname "$PY"):$PATH" jlpm test )
elif [ -n "${CI:-}" ]; then
  echo "[run] node is missing: the labextension cannot be built or tested" >&2; exit 1
else
  echo "[run] WARNING: node is missing: labextension unit tests SKIPPED" >&2
fi
phase "labextension tests (vitest)"
status=0
if [ $# -eq 0 ] && [ "${JT_SERIAL:-0}" != 1 ]; then
  # Three lanes at once. The slurm lane: the Slurm test cluster's tests that need it to
  # themselves (the browser's, and those that stop, restart or reshape it: marked
  # cluster_disruptive, they hold the cluster lease alone). The lane beside it: the cluster tests
  # marked slurm_beside, which run jobs alongside others' (they hold the lease shared, so none runs
  # while the cluster is disturbed), and the Kubernetes emulator's tests. The third: all others.
  # Most of them wait (on Slurm, the emulator's kubelet, a browser), so they overlap well on 2
  # cores. JT_SERIAL=1: one pytest.
  slurm_lane="slurm and not slurm_beside"
  beside_lane="(slurm and slurm_beside) or (k8s_emulator and not slurm)"
  rest_lane="not slurm and not k8s_emulator"
  rm -f test-output/durations-slurm.json test-output/durations-rest.json test-output/durations-beside.json
  echo "[run] pytest, three lanes at once: -m '$slurm_lane' (below)," \
       "-m '$beside_lane' (test-output/pytest-beside.log), -m '$rest_lane' (test-output/pytest-rest.log)"
  JT_DURATIONS_FILE=test-output/durations-rest.json \
    "$PY" -m pytest -p no:cacheprovider -m "$rest_lane" >test-output/pytest-rest.log 2>&1 &
  rest_pid=$!
  JT_DURATIONS_FILE=test-output/durations-beside.json \
    "$PY" -m pytest -p no:cacheprovider -m "$beside_lane" >test-output/pytest-beside.log 2>&1 &
  beside_pid=$!
  trap 'kill "$rest_pid" "$beside_pid" 2>/dev/null || true' INT TERM
  JT_DURATIONS_FILE=test-output/durations-slurm.json \
    "$PY" -m pytest -p no:cacheprovider -m "$slurm_lane" || status=$?
  phase "pytest: the slurm lane"
  beside_status=0
  wait "$beside_pid" || beside_status=$?
  rest_status=0
  wait "$rest_pid" || rest_status=$?
  phase "pytest: the other two lanes (their rest)"
  echo "[run] the lane beside it, pytest -m '$beside_lane' (exit $beside_status):"
  cat test-output/pytest-beside.log
  echo "[run] the third lane, pytest -m '$rest_lane' (exit $rest_status):"
  cat test-output/pytest-rest.log
  [ "$status" != 0 ] || status=$beside_status
  [ "$status" != 0 ] || status=$rest_status
  "$PY" -m tests.durations test-output/durations-slurm.json test-output/durations-beside.json \
    test-output/durations-rest.json || true
  # After the lanes, so the example notebooks show the outputs this run's tests/examples saved.
  docs_status=0
  build_docs || docs_status=$?
  phase "docs (sphinx -W, internal links)"
  [ "$status" != 0 ] || status=$docs_status
else
  echo "[run] pytest"
  "$PY" -m pytest -p no:cacheprovider "$@" || status=$?
  phase "pytest"
fi
print_phases
exit "$status"
