#!/usr/bin/env bash
# The main job: run examples/quickstart.ipynb headless on the embedded local tier (no cluster,
# no profile needed) and print each cell's output, ending with the job's summary line.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source tests/bootstrap.sh
exec "$PY" examples/run_notebook.py examples/quickstart.ipynb "$@"
