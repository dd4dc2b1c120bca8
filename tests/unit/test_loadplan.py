"""The load test's pure parts (jupyter_tiers/serving/loadplan.py): percentiles against numpy and
statistics, the open-loop schedule, the checks of every argument (load_limit_rps refused with a
clear error), the request's bytes, the per-second series and summary, and a seeded fuzz of the
arguments and of the profile key."""

from __future__ import annotations

import itertools
import math
import random
import statistics
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from jupyter_tiers.config.profiles import ConfigError, load_config
from jupyter_tiers.config.registry import JobRecord
from jupyter_tiers.core.errors import SpecError, TiersError
from jupyter_tiers.engine.handles import Service
from jupyter_tiers.serving import loadplan as lp
from tests.helpers import local_profile

SEED = 20261203


# --- percentiles ----------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 10, 99, 100, 101, 1000])
def test_percentiles_match_numpy_linear_and_statistics_inclusive(n: int) -> None:
    rng = random.Random(SEED + n)
    values = [rng.lognormvariate(-4, 1) for _ in range(n)]
    for q in (0, 1, 25, 50, 90, 95, 99, 99.9, 100):
        ours = lp.percentile(values, q)
        assert ours == pytest.approx(float(np.percentile(values, q, method="linear")), rel=1e-12, abs=1e-15)
    if n >= 2:
        cuts = statistics.quantiles(values, n=100, method="inclusive")  # cuts[k-1] is the k-th percentile
        for q in (1, 50, 95, 99):
            assert lp.percentile(values, q) == pytest.approx(cuts[q - 1], rel=1e-12, abs=1e-15)


def test_percentile_edges() -> None:
    assert lp.percentile([], 50) is None
    assert lp.percentile([7.0], 99) == 7.0
    assert lp.percentile([3, 1, 2], 50) == 2.0  # unsorted input is sorted
    assert lp.percentile([0, 10], 95) == pytest.approx(9.5)
    with pytest.raises(ValueError, match="q is from 0 to 100"):
        lp.percentile([1.0], 101)
    assert lp.latency_percentiles([]) == {"p50_ms": None, "p95_ms": None, "p99_ms": None}
    assert lp.latency_percentiles([0.001, 0.003]) == {"p50_ms": 2.0, "p95_ms": 2.9, "p99_ms": 2.98}


# --- the schedule -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("rps", "seconds", "count"), [(50, 60, 3000), (200, 3, 600), (0.5, 3, 2), (3, 1, 3),
                                                       (7, 0.5, 4), (1, 1, 1)])
def test_arrivals_are_evenly_spaced_from_the_start(rps: float, seconds: float, count: int) -> None:
    assert lp.arrival_count(rps, seconds) == count
    times = [lp.arrival(i, rps) for i in range(count)]
    assert times[0] == 0.0 and all(t < seconds for t in times)
    gaps = {round(b - a, 9) for a, b in itertools.pairwise(times)}
    assert gaps <= {round(1 / rps, 9)}
    assert lp.arrival(count, rps) >= seconds - 1e-9  # the next one would be outside the run


# --- arguments ---------------------------------------------------------------------------------------
def test_plan_defaults_and_limit() -> None:
    plan = lp.check_plan(50, 60, 16, None, limit_rps=200)
    assert (plan.rps, plan.seconds, plan.concurrency, plan.count) == (50.0, 60.0, 16, 3000)
    assert plan.request == lp.LoadRequest("GET", "/", (), b"")
    assert lp.check_plan(200, 1, 1, limit_rps=200).rps == 200.0
    with pytest.raises(SpecError) as err:
        lp.check_plan(201, 1, 1, limit_rps=200, profile="laptop")
    assert str(err.value) == ("rps: 201 is over the load_limit_rps of profile 'laptop' (200); ask for less, "
                              "or raise load_limit_rps in tiers.yaml")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"rps": 0}, "rps: requests per second above 0, got 0"),
    ({"rps": -1}, "rps: requests per second above 0, got -1"),
    ({"rps": True}, "rps: requests per second above 0, got True"),
    ({"rps": "50"}, "rps: requests per second above 0, got '50'"),
    ({"rps": math.nan}, "rps: requests per second above 0, got nan"),
    ({"seconds": 0}, "seconds: a duration above 0, at most 3600, got 0"),
    ({"seconds": 3601}, "seconds: a duration above 0, at most 3600, got 3601"),
    ({"concurrency": 0}, "concurrency: a whole number from 1 to 1024, got 0"),
    ({"concurrency": 2.0}, "concurrency: a whole number from 1 to 1024, got 2.0"),
    ({"timeout": 0}, "timeout: seconds above 0, at most 3600, got 0"),
    ({"rps": 1e-12}, "rps: 1e-12 for 1 s sends no request; ask for more"),
    ({"rps": 1000, "seconds": 3600}, "seconds: rps x seconds is at most 1,000,000 requests in one run"),
])
def test_bad_arguments_say_what_is_allowed(kwargs: dict[str, Any], message: str) -> None:
    args = {"rps": 10, "seconds": 1, "concurrency": 4, "timeout": 30.0, **kwargs}
    with pytest.raises(SpecError) as err:
        lp.check_plan(args["rps"], args["seconds"], args["concurrency"], limit_rps=10_000,
                      timeout=args["timeout"])
    assert str(err.value) == message


def test_requests_parsed_and_encoded() -> None:
    assert lp.parse_request("/health") == lp.LoadRequest("GET", "/health")
    assert lp.parse_request("post /v1/x") == lp.LoadRequest("POST", "/v1/x")
    req = lp.parse_request({"method": "post", "path": "/v1/chat", "json": {"a": [1, 2]},
                            "headers": {"X-Token": "t"}})
    assert req.body == b'{"a": [1, 2]}'
    assert req.headers == (("X-Token", "t"), ("Content-Type", "application/json"))
    wire = req.encode("127.0.0.1:8000")
    head, _, body = wire.partition(b"\r\n\r\n")
    assert head.split(b"\r\n") == [b"POST /v1/chat HTTP/1.1", b"Host: 127.0.0.1:8000",
                                   b"Connection: keep-alive", b"User-Agent: jupyter-tiers-load",
                                   b"X-Token: t", b"Content-Type: application/json", b"Content-Length: 13"]
    assert body == b'{"a": [1, 2]}'
    put = lp.parse_request({"method": "PUT", "body": "x"})
    assert put.encode("h").endswith(b"Content-Length: 1\r\n\r\nx")
    assert b"Content-Length" not in lp.LoadRequest().encode("h")


@pytest.mark.parametrize(("request_", "message"), [
    ("http://evil.example/", "request.path: a path on the service starting with '/' (not a URL)"),
    ("//evil.example/x", "request.path: a path on the service starting with '/' (not a URL)"),
    ("/a b", "request.path:"),
    ("/a\r\nX: y", "request.path:"),
    ("/<b>x</b>", "request.path:"),
    ("/a#frag", "request.path:"),
    ("/é", "request.path:"),
    ({"path": "/ok", "url": "http://x"},
     "request: unknown key 'url'; allowed: method, path, headers, body, json"),
    ({"method": "CONNECT"},
     "request.method: one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, got 'CONNECT'"),
    ({"headers": {"Host": "evil"}}, "request.headers: Host is set by the load generator"),
    ({"headers": {"X-A": "1\r\nX-B: 2"}}, "request.headers.X-A: printable Latin-1 text on one line"),
    ({"headers": {"bad name": "1"}}, "request.headers: a header name is a token"),
    ({"headers": ["X-A"]}, "request.headers: a mapping of name to value, got list"),
    ({"body": "a", "json": {}}, "request: give body or json, not both"),
    ({"body": 5}, "request.body: text or bytes, got int"),
    ({"json": {1j}}, "request.json: a JSON value"),
    (42, "request: a path, 'METHOD /path' or a mapping, got int"),
])
def test_bad_requests_refused(request_: Any, message: str) -> None:
    with pytest.raises(SpecError) as err:
        lp.parse_request(request_)
    assert str(err.value).startswith(message)


def test_profile_limit_key() -> None:
    assert lp.limit_of({}) == 200
    assert lp.limit_of({"load_limit_rps": 500}) == 500
    with pytest.raises(SpecError, match=r"load_limit_rps: a number of requests per second from 1 to 10000"):
        lp.limit_of({"load_limit_rps": 0})


def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Any:
    path = tmp_path / "tiers.yaml"
    path.write_text(textwrap.dedent(body))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    monkeypatch.setattr("jupyter_tiers.config.profiles.SYSTEM_PATH", tmp_path / "none.yaml")
    monkeypatch.setattr("jupyter_tiers.config.profiles.USER_PATH", tmp_path / "none2.yaml")
    return load_config()


def test_config_validates_load_limit_rps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _config(tmp_path, monkeypatch, """\
        profiles:
          laptop: {tier: local, load_limit_rps: 500}
          serving: {tier: kubernetes, load_limit_rps: 50.5}
        """)
    assert cfg.profile("laptop").get("load_limit_rps") == 500
    assert cfg.profile("serving").get("load_limit_rps") == 50.5
    for bad, problem in (("0", "requests per second from 1 to 10000, got 0"),
                         ("20000", "requests per second from 1 to 10000, got 20000"),
                         (".nan", "requests per second from 1 to 10000, got nan"),
                         ("fast", "expected an integer or a number, got str 'fast'"),
                         ("true", "expected an integer or a number, got bool True")):
        with pytest.raises(ConfigError) as err:
            _config(tmp_path, monkeypatch, f"profiles:\n  laptop: {{tier: local, load_limit_rps: {bad}}}\n")
        assert err.value.key == "profiles.laptop.load_limit_rps" and err.value.problem == problem
    with pytest.raises(ConfigError, match="unknown key"):
        _config(tmp_path, monkeypatch, "profiles:\n  hpc: {tier: slurm, host: h, load_limit_rps: 5}\n")


class _NoForwardTier:
    """A serving tier whose forward must never be asked for: the refusal comes first."""

    def __init__(self, **settings: Any) -> None:
        self.profile = local_profile(Path("/nonexistent"), **settings)
        self.name = self.profile.name

    def port_forward(self, record: Any, local_port: int = 0) -> str:
        raise AssertionError("the forward was opened for a refused load test")


def test_service_load_test_refuses_over_the_limit_before_any_request() -> None:
    record = JobRecord(profile="local", tier="local", kind="service", job_id="web", name="web")
    svc = Service(_NoForwardTier(), record)  # type: ignore[arg-type] # a stand-in: only the profile is read
    with pytest.raises(SpecError, match=r"^rps: 250 is over the load_limit_rps of profile 'local' \(200\)"):
        svc.load_test(rps=250, seconds=1)
    svc = Service(_NoForwardTier(load_limit_rps=20), record)  # type: ignore[arg-type] # as above
    with pytest.raises(SpecError, match=r"\(20\)"):
        svc.load_test(rps=21, seconds=1)
    with pytest.raises(SpecError, match=r"request\.path"):
        svc.load_test(rps=1, seconds=1, request="http://example.com/")


# --- series and summary --------------------------------------------------------------------------------
def _sample(i: int, scheduled: float, start: float | None, end: float | None, status: int | None,
            error: str | None = None) -> lp.Sample:
    s = lp.Sample(i, scheduled)
    s.start, s.end, s.status, s.error = start, end, status, error
    if start is not None and status is not None:
        s.ttfb = start + 0.001
    return s


def test_summary_counts_every_kind_of_request() -> None:
    samples = [
        _sample(0, 0.0, 0.0, 0.010, 200),
        _sample(1, 0.5, 0.5, 0.530, 200),
        _sample(2, 1.0, 1.2, 1.220, 503),  # late and an error
        _sample(3, 1.5, None, None, None, "not sent: 1 requests in flight (concurrency)"),
        _sample(4, 1.8, 1.8, 1.900, None, "connection refused"),
    ]
    s = lp.summarize(samples, elapsed=2.0, rps=2.5)
    assert {k: s[k] for k in ("scheduled", "sent", "answered", "ok", "errors", "dropped", "late")} == {
        "scheduled": 5, "sent": 4, "answered": 3, "ok": 2, "errors": 2, "dropped": 1, "late": 1}
    assert s["sent_rps"] == 2.0 and s["throughput_rps"] == 1.5 and s["error_rate"] == 0.5
    assert s["p50_ms"] == pytest.approx(20.0) and s["p99_ms"] == pytest.approx(29.8)
    assert s["ttfb_p50_ms"] == 1.0
    rows = [x.record() for x in samples]
    assert rows[3]["start"] is None and rows[3]["late"] is False and rows[2]["late"] is True
    assert rows[0]["latency"] == pytest.approx(0.010) and rows[0]["ttfb"] == pytest.approx(0.001)


def test_canary_counts_are_the_answers_its_pods_named() -> None:
    samples = [_sample(i, i * 0.1, i * 0.1, i * 0.1 + 0.01, 200 if i % 2 else 500) for i in range(6)]
    for s, who in zip(samples, ["web-canary-a", "web-canary-a", "web-b", None, "web-canary-a", "web-b"],
                      strict=True):
        s.replica = who
    assert lp.canary_counts(samples, {"web-canary-a"}) == {
        "canary_answered": 3, "canary_errors": 2, "canary_error_rate": round(2 / 3, 4)}
    assert lp.canary_counts(samples, set()) == {"canary_answered": 0, "canary_errors": 0,
                                                "canary_error_rate": None}
    assert samples[0].record()["replica"] == "web-canary-a"


def test_series_rows_per_second_with_ready_replicas() -> None:
    series = lp.Series()
    series.replicas(0.0, 1, 1)
    for t in (0.1, 0.2, 1.1):
        series.sent(t, late=t > 1)
    series.ended(0.15, 0.05, True)
    series.ended(0.30, 0.10, True)
    series.ended(1.3, None, False)
    series.dropped(1.4)
    series.replicas(1.5, 2, 2)
    rows = series.rows()
    assert [r["t"] for r in rows] == [0.0, 1.0]
    assert rows[0] == {"t": 0.0, "sent": 2, "answered": 2, "throughput_rps": 2.0, "errors": 0, "dropped": 0,
                       "late": 0, "error_rate": 0.0, "p50_ms": 75.0, "p95_ms": 97.5, "p99_ms": 99.5,
                       "ready": 1, "desired": 1}
    assert (rows[1]["errors"], rows[1]["dropped"], rows[1]["error_rate"], rows[1]["ready"]) == (1, 1, 1.0, 2)
    assert rows[1]["late"] == 1
    assert series.rows() == []  # nothing changed since
    series.ended(1.9, 0.2, True)
    assert [r["t"] for r in series.rows()] == [1.0]
    series.upto(3.2)
    assert [r["t"] for r in series.rows(changed_only=False)] == [0.0, 1.0, 2.0, 3.0]
    assert series.ready_at(1.0) == (1, 1) and series.ready_at(2.0) == (2, 2)


def test_results_without_pandas_are_a_list_of_records(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_pandas(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "pandas":
            raise ImportError("no pandas here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    records = [_sample(0, 0.0, 0.0, 0.01, 200).record()]
    assert lp.to_frame(records) is records


# --- fuzz ---------------------------------------------------------------------------------------------------
def _fuzz_value(rng: random.Random) -> Any:
    pick = rng.randrange(12)
    if pick == 0:
        return None
    if pick == 1:
        return rng.choice([True, False])
    if pick == 2:
        return rng.randint(-5, 3000)
    if pick == 3:
        return rng.choice([math.nan, math.inf, -math.inf, 0.0, 1e-9, 1e12])
    if pick == 4:
        return rng.uniform(-10, 500)
    if pick == 5:
        return "".join(rng.choice("/ab?=&%\x00\r\n\t é/:.") for _ in range(rng.randint(0, 20)))
    if pick == 6:
        return rng.choice(["/", "/health", "GET /x", "POST /v1/chat", "http://x/", "//x", "/a b"])
    if pick == 7:
        return {rng.choice(["method", "path", "headers", "body", "json", "url", 1]): _fuzz_value(rng)
                for _ in range(rng.randint(0, 4))}
    if pick == 8:
        return [rng.randint(0, 5)]
    if pick == 9:
        return {"headers": {rng.choice(["X-A", "Host", "bad name", "", "É"]): _fuzz_value(rng)}}
    if pick == 10:
        return b"\x00\xff"
    return rng.choice(["GET", "get", "CONNECT", "TRACE", "PATCH"])


def test_fuzz_arguments_give_a_plan_or_one_spec_error() -> None:
    rng = random.Random(SEED)
    plans = errors = 0
    for _ in range(4000):
        good = [rng.choice([1, 50, 199.5, 0.5]), rng.choice([1, 2.5, 60]), rng.choice([1, 16, 1024]),
                rng.choice([None, "/", "POST /x", {"path": "/v1", "json": [1]}])]
        args = [_fuzz_value(rng) if rng.random() < 0.3 else g for g in good]
        try:
            plan = lp.check_plan(*args, limit_rps=rng.choice([1, 200, 10_000]), timeout=_fuzz_value(rng)
                                 if rng.random() < 0.2 else 30.0)
        except SpecError as exc:
            errors += 1
            text = str(exc)
            assert "\n" not in text and len(text) < 400 and exc.field, text
            continue
        plans += 1
        assert plan.count >= 1 and plan.rps > 0 and 1 <= plan.concurrency <= lp.MAX_CONCURRENCY
        wire = plan.request.encode("127.0.0.1:1")
        head = wire.split(b"\r\n\r\n", 1)[0]
        assert head.startswith(plan.request.method.encode() + b" /")  # always a path on the service
        assert all(b"\r" not in line and b"\n" not in line for line in head.split(b"\r\n"))
    assert plans > 20 and errors > 1000, (plans, errors)


def test_fuzz_requests_never_leave_the_service() -> None:
    rng = random.Random(SEED + 1)
    for _ in range(4000):
        raw = _fuzz_value(rng)
        try:
            req = lp.parse_request(raw)
        except SpecError as exc:
            assert str(exc).startswith("request")
            continue
        assert req.path.startswith("/") and not req.path.startswith("//")
        assert req.method in lp.METHODS
        assert isinstance(req.body, bytes)


def test_fuzz_profile_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(SEED + 2)
    for _ in range(150):
        value = rng.choice(["0", "1", "200", "1e9", "-3", ".inf", "'x'", "[1]", "{a: 1}", "null", "2.5", "~",
                            "10000", "10001"])
        try:
            cfg = _config(tmp_path, monkeypatch,
                          f"profiles:\n  p: {{tier: local, load_limit_rps: {value}}}\n")
        except ConfigError as exc:
            assert exc.key == "profiles.p.load_limit_rps" and "\n" not in str(exc)
            continue
        except TiersError as exc:  # pragma: no cover - any other refusal is a bug
            raise AssertionError(exc) from exc
        limit = lp.limit_of(cfg.profile("p").settings)
        assert 1 <= limit <= lp.MAX_LIMIT_RPS
