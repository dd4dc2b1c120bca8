"""A service's pods' CPU and memory (Service.usage) against the Kubernetes API emulator, which
like the project's real test cluster has no metrics-server: the one line saying so, as an
Unsupported error (a magic shows it as one line), never a traceback of an API 404."""

from __future__ import annotations

import pytest

from jupyter_tiers.core.errors import Unsupported
from jupyter_tiers.k8s.tier import K8sTier
from tests.k8s.test_k8s_tier import apply_server


def test_usage_says_metrics_are_not_served(tier: K8sTier) -> None:
    service = apply_server(tier, name="metrics")
    with pytest.raises(Unsupported) as info:
        service.usage()
    line = str(info.value)
    assert "\n" not in line and "metrics.k8s.io" in line and "metrics-server" in line, line
