#!/usr/bin/env bash
# Create .venv (once) and install jupyter-tiers with its test extras into it. Idempotent.
# Usage: source tests/bootstrap.sh   (sets $PY to the venv's python)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${JT_VENV:-$ROOT/.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "[bootstrap] creating $VENV"
  python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
stamp="$VENV/.jt-installed"
want="$(cat "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)-${JT_EXTRAS:-test}"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[bootstrap] installing jupyter-tiers[${JT_EXTRAS:-test}] into $VENV"
  "$PY" -m pip install -q --upgrade pip >/dev/null
  "$PY" -m pip install -q -e "$ROOT[${JT_EXTRAS:-test}]"
  echo "$want" > "$stamp"
fi
export PY
