"""The chaos bench's fault schedules (tests/chaos/schedules.py), built for many seeds without
running anything: every fault of every scenario lands inside the span its target has, at the
bounded and the ``--full`` sizes, so that any seed is a valid experiment (issue 31: seed 4 put a
registry fault after its kernel's last operation)."""

from __future__ import annotations

import datetime as dt

import pytest

from jupyter_tiers.core.model import ServeSpec
from jupyter_tiers.k8s.render import render_manifests
from tests.chaos import schedules
from tests.chaos.registry_worker import ops

SEEDS = range(1, 201)
SIZES = {"bounded": schedules.BOUNDED, "full": schedules.FULL}
# How many faults each scenario's plan holds at a size (the bench's arguments).
COUNTS = {
    "k8s: API server restarts": "restarts", "k8s: pod deletions": "deletions",
    "k8s: node evictions": "evictions", "k8s: API outages": "outages",
    "registry: concurrent": "registry_faults", "local: supervisor kills": "kills",
    "local: kernel kills": "kills", "local: kernel kills mid-rollout": "kills",
    "local: clock steps": "clock_steps", "lab-restart": "lab_restarts", "ssh: stream cuts": "cuts",
    "ssh: submit cuts": "submits", "ssh: download cuts": "download_cuts",
    "ssh: sync cuts": "sync_submits", "slurm: slurmctld outages": "ctld_outages",
    "slurm: slurmd kills": "slurmd_kills", "slurm: slurmdbd outages": "dbd_outages",
}


@pytest.mark.parametrize("size", SIZES, ids=list(SIZES))
def test_every_fault_of_every_scenario_lands_inside_its_target_for_200_seeds(size: str) -> None:
    sizes = SIZES[size]
    outside: list[str] = []
    for seed in SEEDS:
        plans = schedules.every_plan(seed, sizes)
        assert set(plans) == {*COUNTS, "registry: damaged"}
        for scenario, plan in plans.items():
            want = len(schedules.DAMAGES) if scenario == "registry: damaged" else sizes[COUNTS[scenario]]
            assert len(plan) == want, (seed, scenario)
            outside += [f"seed {seed} {scenario}: {f}" for f in plan if not f.inside]
    assert not outside, outside[:5]


def test_a_seed_always_draws_the_same_schedule_and_seeds_differ() -> None:
    assert schedules.every_plan(4, schedules.FULL) == schedules.every_plan(4, schedules.FULL)
    assert schedules.every_plan(4, schedules.FULL) != schedules.every_plan(5, schedules.FULL)


@pytest.mark.parametrize("size", SIZES, ids=list(SIZES))
def test_a_registry_fault_comes_before_the_last_operation_its_kernel_waits_at(size: str) -> None:
    """The span's end is the kernel's real last operation (registry_worker.ops), where it waits
    for its release; every fault is drawn before it, for both kernels."""
    sizes = SIZES[size]
    per_kernel = len(ops("k0", sizes["jobs"] // 2, sizes["services"] // 2))
    assert schedules.registry_operations(sizes["jobs"], sizes["services"], 2) == per_kernel
    targets: set[str] = set()
    for seed in SEEDS:
        for fault in schedules.registry_concurrent(seed, sizes["jobs"], sizes["services"],
                                                   sizes["registry_faults"]):
            assert 0 <= fault.at < per_kernel - 1 and fault.span == (0, per_kernel - 1)
            assert fault.kind in ("SIGSTOP", "SIGKILL")
            targets.add(fault.target)
    assert targets == {"k0", "k1"}


def test_the_registry_regression_seed_holds_one_kernel_while_the_other_is_due() -> None:
    """tests/chaos/test_chaos_registry.py replays seed 79: a kernel SIGSTOPped over 1.5 s, then a
    fault due on the other kernel a few operations later (which, delivered in turn, found that
    kernel long finished)."""
    first, second = schedules.registry_concurrent(79, 200, 50, 2)
    assert first.kind == "SIGSTOP" and first.hold > 1.5
    assert second.target != first.target and second.at - first.at < 10


def test_a_rollout_lasts_as_long_as_its_span_says() -> None:
    """The k8s span assumes the product rolls a Deployment one replica at a time (maxSurge 1,
    maxUnavailable 0): with each replica listening K8S_LISTEN_AFTER_S after it starts, a rollout
    of K8S_REPLICAS lasts at least K8S_ROLLOUT_MIN_S."""
    manifests = render_manifests(ServeSpec(body="print(1)", name="x", image="python:3.11-slim",
                                           replicas=schedules.K8S_REPLICAS, port=8000), namespace="ns")
    deployment = next(m for m in manifests if m["kind"] == "Deployment")
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert schedules.K8S_ROLLOUT_MIN_S == schedules.K8S_REPLICAS * schedules.K8S_LISTEN_AFTER_S
    for seed in SEEDS:
        for fault in schedules.k8s_api_restarts(seed, schedules.FULL["restarts"]):
            assert fault.at < schedules.K8S_ROLLOUT_MIN_S / 2  # half of it left as margin


def test_ssh_stream_cuts_fall_while_the_job_still_writes_its_lines() -> None:
    for size in SIZES.values():
        for seed in SEEDS:
            plan = schedules.ssh_stream_cuts(seed, size["cuts"], size["lines"])
            ats = [f.at for f in plan]
            assert ats == sorted(ats) and ats[-1] < size["lines"] / schedules.LINES_PER_S
            assert {f.kind for f in plan} <= {"client", "server"}


def test_the_ci_seed_is_the_dates_unless_given_and_the_replay_line_says_how() -> None:
    day = dt.date(2026, 12, 4)
    assert schedules.ci_seed({}, day) == (20261204, "the date, 2026-12-04 UTC")
    assert schedules.ci_seed({"JT_CHAOS_SEED": " 4 "}, day) == (4, "JT_CHAOS_SEED")
    assert schedules.ci_seed({}, day + dt.timedelta(days=1))[0] != schedules.ci_seed({}, day)[0]
    line = schedules.replay_line(20261204, "the date, 2026-12-04 UTC")
    assert "chaos seed 20261204 (from the date, 2026-12-04 UTC)" in line
    assert "JT_CHAOS_SEED=20261204 .venv/bin/python -m pytest -p no:cacheprovider tests/chaos" in line
    assert "bench/chaos.py --seed 20261204" in line
