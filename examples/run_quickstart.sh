#!/usr/bin/env bash
# The main job: run examples/quickstart.ipynb headless on the embedded local tier (no cluster,
# no profile needed) and print each cell's output: the training job's summary line (with its
# newest checkpoint), the summary line of the service serving that checkpoint, the model's answer,
# the jobs table and the service's deletion. Extra arguments go to run_notebook.py (--timeout S).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source tests/bootstrap.sh
exec "$PY" examples/run_notebook.py examples/quickstart.ipynb "$@"
