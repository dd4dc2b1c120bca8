"""Load generator accuracy and overhead (issue 19 item 2): ``Service.load_test`` against a plain
asyncio generator (the baseline: the same open-loop schedule and kept-alive HTTP/1.1 connections,
no plan checks, no series, no status watch, no thread) run in the same process on the same local
service, whose one replica counts the requests it gets (tests/local_serve/count_server.py).

Per asked rate: the rate the server saw (the least-squares slope of its arrival times, and its
count over the run's length), the generator's own CPU (this process's CPU time over the run's
wall time: ours includes its status watch), and latency p50/p99 of each; ratios ours / baseline.
Runs alternate (ours first, then the baseline, then the other way round); medians over ``--runs``.

Run: .venv/bin/python bench/load.py [--rates 50,200,500] [--seconds 10] [--runs 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.local.serve_tier import LocalServeTier
from jupyter_tiers.serving.loadplan import percentile

ROOT = Path(__file__).resolve().parents[1]
COUNT_BODY = (ROOT / "tests" / "local_serve" / "count_server.py").read_text()
CONCURRENCY = 64


def server_times(url: str) -> list[float]:
    with urllib.request.urlopen(url + "/__stats", timeout=60) as resp:
        return list(json.loads(resp.read())["times"])


def fitted_rate(times: list[float]) -> float:
    n = len(times)
    if n < 2:
        return 0.0
    times = sorted(times)
    mean_t, mean_i = sum(times) / n, (n - 1) / 2
    cov = sum((t - mean_t) * (i - mean_i) for i, t in enumerate(times))
    var = sum((t - mean_t) ** 2 for t in times)
    return cov / var if var else 0.0


async def baseline(host: str, port: int, rps: float, seconds: float) -> list[float]:
    """The plain asyncio generator: latencies (s) of the answered requests."""
    request = f"GET /hello HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: keep-alive\r\n\r\n".encode()
    pool: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    latencies: list[float] = []
    inflight = [0]

    async def one() -> None:
        start = time.monotonic()
        reader, writer = pool.pop() if pool else await asyncio.open_connection(host, port)
        writer.write(request)
        await writer.drain()
        await reader.readline()
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        await reader.readexactly(length)
        latencies.append(time.monotonic() - start)
        pool.append((reader, writer))
        inflight[0] -= 1

    t0 = time.monotonic()
    tasks = []
    for i in range(int(rps * seconds)):
        delay = t0 + i / rps - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if inflight[0] >= CONCURRENCY:
            continue
        inflight[0] += 1
        tasks.append(asyncio.ensure_future(one()))
    await asyncio.gather(*tasks, return_exceptions=True)
    for _, writer in pool:
        writer.close()
    return latencies


def measure(kind: str, svc: Any, url: str, rps: float, seconds: float) -> dict[str, float]:
    before = len(server_times(url))
    wall0, cpu0 = time.monotonic(), time.process_time()
    if kind == "ours":
        svc.load_test(rps=rps, seconds=seconds, concurrency=CONCURRENCY, request="/hello")
        latencies = [s.latency for s in svc.last_load_test.samples if s.latency is not None]
    else:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        latencies = asyncio.run(baseline(host, int(port), rps, seconds))
    wall, cpu = time.monotonic() - wall0, time.process_time() - cpu0
    times = server_times(url)[before:]
    return {
        "served_rps": fitted_rate(times),
        "count_rps": len(times) / seconds,
        "cpu_pct": 100 * cpu / wall,
        "p50_ms": 1000 * (percentile(latencies, 50) or 0.0),
        "p99_ms": 1000 * (percentile(latencies, 99) or 0.0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="50,200,500")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        profile = Profile(name="bench", tier="local",
                          settings={"workdir": str(Path(tmp) / "work"), "load_limit_rps": max(rates)})
        tier = LocalServeTier(profile, Registry(Path(tmp) / "registry.sqlite"))
        svc = tier.apply(tier.make_spec(COUNT_BODY, name="loadbench"))
        try:
            status = svc.wait_ready(120)
            assert status.state.value == "READY", status
            url = svc.port_forward()
            svc.load_test(rps=20, seconds=1, request="/hello")  # warm: connections, imports
            print(f"{'asked':>6} {'kind':>8} {'served/s':>9} {'count/s':>8} {'cpu %':>6} {'p50 ms':>7} "
                  f"{'p99 ms':>7}")
            for rps in rates:
                results: dict[str, list[dict[str, float]]] = {"ours": [], "baseline": []}
                for run in range(args.runs):
                    order = ["ours", "baseline"] if run % 2 == 0 else ["baseline", "ours"]
                    for kind in order:
                        results[kind].append(measure(kind, svc, url, rps, args.seconds))
                med = {kind: {key: statistics.median(r[key] for r in rs) for key in rs[0]}
                       for kind, rs in results.items()}
                for kind in ("ours", "baseline"):
                    m = med[kind]
                    print(f"{rps:>6g} {kind:>8} {m['served_rps']:>9.1f} {m['count_rps']:>8.1f} "
                          f"{m['cpu_pct']:>6.1f} {m['p50_ms']:>7.2f} {m['p99_ms']:>7.2f}")
                o, b = med["ours"], med["baseline"]
                cpu_ratio = o["cpu_pct"] / max(b["cpu_pct"], 1e-9)
                print(f"{'':>6} {'ratio':>8} served/asked {o['served_rps'] / rps:.3f} (baseline "
                      f"{b['served_rps'] / rps:.3f}); cpu ours/baseline {cpu_ratio:.2f}x; added latency "
                      f"p50 {o['p50_ms'] - b['p50_ms']:+.2f} ms, p99 {o['p99_ms'] - b['p99_ms']:+.2f} ms")
        finally:
            svc.delete()
            tier.close()


if __name__ == "__main__":
    main()
