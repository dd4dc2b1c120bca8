"""The handoff tests take the Kubernetes emulator and the Slurm test cluster's ``box`` tier from
the fixtures the other test folders use (each started only when a test asks for it). TRAIN is the
training body both handoff tests (local tier, Slurm cluster) run."""

from tests.cluster.conftest import box, tiers_yaml  # noqa: F401
from tests.k8s_emulator.fixtures import emulator, k8s_namespace  # noqa: F401

# Every rank reports whether JT_CHECKPOINT_DIR exists; rank 0 writes two checkpoints into it.
TRAIN = """\
import os, pathlib
d = os.environ["JT_CHECKPOINT_DIR"]
print("checkpoint dir", d, "exists" if os.path.isdir(d) else "missing", flush=True)
if os.environ["RANK"] == "0":
    for step in (50, 100):
        pathlib.Path(d, f"ckpt-{step:06d}.pt").write_text(f"weights of step {step}")
"""
