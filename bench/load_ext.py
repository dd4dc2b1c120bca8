"""Time of ``%load_ext jupyter_tiers`` with the kubernetes client installed and hidden.

Each run is a fresh ``python`` subprocess that creates an IPython ``InteractiveShell`` (not timed:
every kernel has one) and then times ``shell.run_line_magic("load_ext", "jupyter_tiers")``, which
imports jupyter_tiers and jupyter_tiers.faces.magics and registers the magics. It reports whether
``kubernetes`` (or paramiko, ipywidgets) ended up in ``sys.modules`` and whether ``%tiers`` exists.

- installed: the venv as it is (the kubernetes client importable);
- hidden: the same, with a meta path finder installed first that makes ``import kubernetes``
  raise ModuleNotFoundError, as on a machine without the client;
- ``import kubernetes`` alone, in a fresh subprocess, for comparison (what loading the extension
  would cost if it imported the client).

Medians of ``--runs`` (15) runs, the three kinds interleaved. Nothing is asserted. The machine
has 2 cores and may be shared with other work, which shows in the spread.

Run: .venv/bin/python bench/load_ext.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BLOCK_KUBERNETES = r"""
import sys

class _NoKubernetes:
    def find_spec(self, name, path=None, target=None):
        if name == "kubernetes" or name.startswith("kubernetes."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoKubernetes())
"""

LOAD_EXT = r"""
import json, sys, time
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
t0 = time.perf_counter()
shell.run_line_magic("load_ext", "jupyter_tiers")
t1 = time.perf_counter()
loaded = set(sys.modules)  # before the check below imports the client
try:
    import kubernetes  # noqa: F401
    importable = True
except ImportError:
    importable = False
magics = shell.magics_manager.magics
print(json.dumps({
    "seconds": t1 - t0,
    "kubernetes_loaded": any(m == "kubernetes" or m.startswith("kubernetes.") for m in loaded),
    "paramiko_loaded": "paramiko" in loaded,
    "ipywidgets_loaded": "ipywidgets" in loaded,
    "kubernetes_importable": importable,
    "magics": sorted(magics["line"].keys() & {"tiers"}) + sorted(magics["cell"].keys() & {"slurm_train"}),
}))
"""

IMPORT_KUBERNETES = r"""
import json, time
t0 = time.perf_counter()
import kubernetes  # noqa: F401
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""


def run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True,
                         text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    kinds = {
        "installed": LOAD_EXT,
        "hidden": BLOCK_KUBERNETES + LOAD_EXT,
        "import kubernetes": IMPORT_KUBERNETES,
    }
    results: dict[str, list[dict]] = {k: [] for k in kinds}
    for i in range(args.runs):
        order = list(kinds) if i % 2 == 0 else list(reversed(kinds))
        for kind in order:
            results[kind].append(run(kinds[kind]))
    ms = {k: sorted(r["seconds"] * 1e3 for r in v) for k, v in results.items()}
    med = {k: statistics.median(v) for k, v in ms.items()}

    print(f"\n%load_ext jupyter_tiers in a fresh InteractiveShell, fresh subprocess each run, "
          f"median of {args.runs} (Python {sys.version.split()[0]})")
    row = "{:<46} {:>9} {:>9} {:>9}"
    print(row.format("", "median", "min", "max"))
    labels = {
        "installed": "%load_ext, kubernetes client installed (ms)",
        "hidden": "%load_ext, kubernetes client hidden (ms)",
        "import kubernetes": "import kubernetes alone (ms)",
    }
    for kind, label in labels.items():
        print(row.format(label, f"{med[kind]:.1f}", f"{ms[kind][0]:.1f}", f"{ms[kind][-1]:.1f}"))
    print(f"installed / hidden: {med['installed'] / med['hidden']:.2f}x; "
          f"import kubernetes / %load_ext (installed): {med['import kubernetes'] / med['installed']:.1f}x")
    for kind in ("installed", "hidden"):
        runs = results[kind]
        loaded = sum(r["kubernetes_loaded"] for r in runs)
        print(f"{kind}: kubernetes in sys.modules after %load_ext in {loaded} of {len(runs)} runs; "
              f"paramiko {sum(r['paramiko_loaded'] for r in runs)}, ipywidgets "
              f"{sum(r['ipywidgets_loaded'] for r in runs)}; kubernetes importable: "
              f"{runs[0]['kubernetes_importable']}; magics registered: {', '.join(runs[0]['magics'])}")


if __name__ == "__main__":
    main()
