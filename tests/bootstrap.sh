#!/usr/bin/env bash
# Create .venv (once) and install jupyter-tiers with its test and docs extras into it. Idempotent.
# Usage: source tests/bootstrap.sh   (sets $PY to the venv's python)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${JT_VENV:-$ROOT/.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "[bootstrap] creating $VENV"
  python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
lab_link="$VENV/share/jupyter/labextensions/jupyter-tiers"
stamp="$VENV/.jt-installed"
want="$(cat "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)-${JT_EXTRAS:-test,docs}"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[bootstrap] installing jupyter-tiers[${JT_EXTRAS:-test,docs}] into $VENV"
  "$PY" -m pip install -q --upgrade pip >/dev/null
  # pip would uninstall the old copy's files through develop's symlink, i.e. in the source tree.
  if [ -L "$lab_link" ]; then rm "$lab_link"; fi
  "$PY" -m pip install -q -e "$ROOT[${JT_EXTRAS:-test,docs}]"
  echo "$want" > "$stamp"
fi
# The "Tiers" sidebar (labextension/; jlpm comes with jupyterlab): the build script hashes the
# sources and skips an unchanged tree (the install's build hook used the same script). Without
# Node there is no sidebar (tests/run.sh then says so). JT_NO_LABEXTENSION=1 (run.sh --fast) skips
# it and the link below: the fast lane installs nothing beyond the venv.
if [ "${JT_NO_LABEXTENSION:-0}" = 1 ]; then
  :
elif command -v node >/dev/null && [ -x "$VENV/bin/jlpm" ]; then
  ( cd "$ROOT/labextension" && export PATH="$VENV/bin:$PATH" \
      && { [ node_modules/.yarn-state.yml -nt package.json ] && [ node_modules/.yarn-state.yml -nt yarn.lock ] \
           || { jlpm install >/dev/null && touch node_modules/.yarn-state.yml; }; } \
      && node scripts/build-if-changed.mjs ) \
    || { echo "[bootstrap] labextension build failed" >&2; exit 1; }
fi
# An editable install copies the extension once; a link to jupyter_tiers/labextension follows rebuilds.
if [ "${JT_NO_LABEXTENSION:-0}" != 1 ] && [ -f "$ROOT/jupyter_tiers/labextension/package.json" ] \
    && [ ! -L "$lab_link" ] \
    && [ -x "$VENV/bin/jupyter-builder" ]; then
  "$VENV/bin/jupyter-builder" develop --overwrite "$ROOT" >/dev/null
fi
export PY
