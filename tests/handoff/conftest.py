"""The handoff tests take the Kubernetes emulator and the Slurm test cluster's ``box`` tier from
the fixtures the other test folders use (each started only when a test asks for it)."""

from tests.cluster.conftest import box, tiers_yaml  # noqa: F401
from tests.k8s_emulator.fixtures import emulator, k8s_namespace  # noqa: F401
