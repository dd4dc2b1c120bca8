"""Bounded chaos on the Kubernetes emulator: 5 API server restarts mid-rollout, 1 pod deleted by
hand, the node's pods evicted twice (memory pressure, then a drain); any line lost or repeated,
or a status that does not end equal to a fresh list, fails."""

from __future__ import annotations

from tests.chaos.harness import Outcome
from tests.chaos.scenarios_k8s import (
    api_down_longer_than_stale_after,
    api_server_restarts,
    node_evictions,
    pod_deletions,
)
from tests.k8s_emulator.emulator import Emulator


def assert_clean(outcome: Outcome) -> None:
    assert outcome.faults and outcome.checked, outcome
    assert outcome.clean, (outcome.problems, outcome)


def test_api_server_restarted_mid_rollout(emulator: Emulator, k8s_namespace: str, seed: int) -> None:
    outcome = api_server_restarts(emulator, k8s_namespace, seed=seed, restarts=5)
    assert outcome.faults == 5
    assert_clean(outcome)


def test_pod_deleted_by_hand(emulator: Emulator, k8s_namespace: str, seed: int) -> None:
    outcome = pod_deletions(emulator, k8s_namespace, seed=seed, deletions=1)
    assert_clean(outcome)


def test_api_down_longer_than_stale_after_shows_unknown(emulator: Emulator, k8s_namespace: str,
                                                       seed: int) -> None:
    outcome = api_down_longer_than_stale_after(emulator, k8s_namespace, seed=seed, outages=1)
    assert_clean(outcome)


def test_node_pods_evicted(emulator: Emulator, k8s_namespace: str, seed: int) -> None:
    outcome = node_evictions(emulator, k8s_namespace, seed=seed, evictions=2)
    assert outcome.faults == 2
    assert_clean(outcome)
