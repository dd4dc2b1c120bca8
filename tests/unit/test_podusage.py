"""A service's pods' CPU and memory from metrics.k8s.io (serving/podusage.py): Kubernetes
quantities, a PodMetricsList as metrics-server writes it, the line said where the API is not
served; seeded fuzz."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from jupyter_tiers.serving.podusage import not_served_line, parse_quantity, pod_usage_rows

# The shape metrics-server 0.7 answers GET /apis/metrics.k8s.io/v1beta1/namespaces/NS/pods with.
LIST = {
    "kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {},
    "items": [
        {"metadata": {"name": "chat-7f9c-abcde", "namespace": "ml", "labels": {"app": "chat"}},
         "timestamp": "2026-12-06T04:50:12Z", "window": "15.029s",
         "containers": [{"name": "server", "usage": {"cpu": "1534237941n", "memory": "2147483648"}},
                        {"name": "fetch", "usage": {"cpu": "0", "memory": "3412Ki"}}]},
        {"metadata": {"name": "chat-7f9c-aaaaa", "namespace": "ml"},
         "timestamp": "2026-12-06T04:50:10Z", "window": "16s",
         "containers": [{"name": "server", "usage": {"cpu": "250m", "memory": "512Mi"}}]},
    ],
}


@pytest.mark.parametrize(("text", "value"), [
    ("250m", 0.25), ("1", 1.0), ("1.5", 1.5), ("1534237941n", 1.534237941), ("100u", 1e-4),
    ("512Mi", 512 * 2**20), ("1Gi", 2**30), ("3412Ki", 3412 * 1024), ("1G", 1e9), ("2k", 2000.0),
    ("1e3", 1000.0), (".5", 0.5), ("0", 0.0),
])
def test_quantities(text: str, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "m", "12Xi", "-1", "1.2.3", "nan", "inf", "1e999", None, 5, "1 Gi"])
def test_not_quantities(text: Any) -> None:
    assert parse_quantity(text) is None


def test_pod_metrics_list_to_rows() -> None:
    rows = pod_usage_rows(LIST)
    assert [(r["pod"], r["container"]) for r in rows] == [
        ("chat-7f9c-aaaaa", "server"), ("chat-7f9c-abcde", "fetch"), ("chat-7f9c-abcde", "server")]
    assert rows[0] == {"time": "2026-12-06T04:50:10Z", "pod": "chat-7f9c-aaaaa", "container": "server",
                       "cpu_cores": 0.25, "memory_mib": 512.0}
    assert rows[2]["cpu_cores"] == pytest.approx(1.534237941) and rows[2]["memory_mib"] == 2048.0
    assert rows[1]["memory_mib"] == 3.3 and rows[1]["cpu_cores"] == 0


def test_not_served_and_not_allowed_lines() -> None:
    line = not_served_line("ml", 404)
    assert "\n" not in line and "metrics.k8s.io" in line and "metrics-server" in line
    assert "not allowed" in not_served_line("ml", 403) and "ml" in not_served_line("ml", 403)


@pytest.mark.parametrize("seed", range(200))
def test_fuzz_rows_never_raise(seed: int) -> None:
    rng = random.Random(seed)
    junk: list[Any] = [None, 1, "x", [], {}, "250m", "-5", {"cpu": 3}, [{"name": 1}], 1e308, True]

    def mutate(value: Any, depth: int = 0) -> Any:
        if depth > 4 or rng.random() < 0.1:
            return rng.choice(junk)
        if isinstance(value, dict):
            out = {k: mutate(v, depth + 1) for k, v in value.items() if rng.random() > 0.1}
            if rng.random() < 0.2:
                out[rng.choice(["usage", "cpu", "memory", "name", "x"])] = rng.choice(junk)
            return out
        if isinstance(value, list):
            return [mutate(v, depth + 1) for v in value if rng.random() > 0.1]
        if isinstance(value, str) and rng.random() < 0.3:
            return value[: rng.randint(0, len(value))] + rng.choice(["", "m", "Gi", "x", "-", "."])
        return value

    doc = mutate(json.loads(json.dumps(LIST)))
    for row in pod_usage_rows(doc):
        assert set(row) == {"time", "pod", "container", "cpu_cores", "memory_mib"}
        assert row["cpu_cores"] is None or row["cpu_cores"] >= 0
    value = parse_quantity("".join(rng.choice("0123456789.eE+-mkKMGiun ") for _ in range(rng.randint(0, 9))))
    assert value is None or value >= 0
