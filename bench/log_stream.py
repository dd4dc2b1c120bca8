"""Log streaming: latency and throughput of the Slurm tier's log follower against a raw ssh tail,
and the widget path (follower -> LineBatcher -> lines_message messages) at 10,000 lines/s.

A writer process on the "cluster" side (this machine: a local Python process appending to
``job.log`` in a job directory, as a rank would) writes lines ``R: seq=N t=NS ...`` carrying
their write time ``time.time_ns()``; receive time minus that stamp is the latency (same clock).

1. Latency: ``--rate`` lines/s for ``--seconds`` (1,000/s for 10 s), one line per write(2).
   Read by (a) ours: ``LogFollower`` on a JobRecord whose jobdir is that directory, through
   ``box_tier()`` (paramiko; the follow command, ``tail -c +N -F`` through a perl relay that
   coalesces a fast log; LogDecoder) and (b) raw: an OpenSSH client
   subprocess ``ssh -i KEY -o UserKnownHostsFile=KH -p PORT root@127.0.0.1 tail -c +1 -F FILE``
   read with os.read. The two run back-to-back on separate files (fairer on 2 cores), the order
   alternating between runs; both readers stamp a chunk's lines when the chunk reaches Python.
2. Throughput: ``--burst`` lines (500,000) written as fast as possible (64 KiB writes, a
   block-buffered rank); lines/s = lines / (last line received - first write). Also a backlog
   read of the finished file from offset 0 (no writer running: the reader alone is measured).
   Ours is checked for lost, duplicated or reordered lines by sequence number. "Stream only" is
   our transport without the decoder (the tier's log stream, bytes counted like raw's), to tell
   the transport's share from the decoder's.
3. Widget path: ``--widget-rate`` lines/s (10,000) for ``--seconds`` into the follower, whose
   lines go to a real LineBatcher whose send does what JobView._send_lines does (lines_message, the
   message dict, plus its JSON encoding as the comm would); messages/s, lines per message,
   latency write -> message sent, and this process's CPU over the window (paramiko's thread,
   follower, decoder, batcher, lines_message, JSON) as % of one core.

Each phase runs ``--runs`` times (3); the table shows medians. Nothing is asserted.

Run: .venv/bin/python bench/log_stream.py [--rate 1000] [--seconds 10] [--burst 500000]
     [--widget-rate 10000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from _cluster import box_tier, cluster_env

from jupyter_tiers.app.viewstate.job import lines_message
from jupyter_tiers.batch.logs import LogBatch
from jupyter_tiers.config.registry import JobRecord
from jupyter_tiers.engine.watch import LogFollower
from jupyter_tiers.faces.widgets.batcher import LineBatcher

BENCH_DIR = Path("/var/lib/jupyter-tiers-jobs/bench")
LINE_PAD = 40  # filler after "R: seq=N t=NS ": lines of ~80 bytes, like a training log's

# The cluster-side writer: argv = path, lines/s (0: as fast as possible), line count.
# Prints the time.time_ns() of its first and last write.
WRITER = r"""
import os, sys, time
path, rate, count = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
pad = "x" * int(sys.argv[4])
fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
first = time.time_ns()
if rate > 0:  # paced, one write(2) per line ("flushed per line")
    period = 1.0 / rate
    start = time.monotonic()
    for seq in range(count):
        target = start + seq * period
        now = time.monotonic()
        if target > now:
            time.sleep(target - now)
        os.write(fd, f"{seq % 4}: seq={seq} t={time.time_ns()} {pad}\n".encode())
else:  # as fast as possible, 64 KiB writes
    buf, size = [], 0
    for seq in range(count):
        line = f"{seq % 4}: seq={seq} t={time.time_ns()} {pad}\n"
        buf.append(line)
        size += len(line)
        if size >= 65536:
            os.write(fd, "".join(buf).encode())
            buf, size = [], 0
    os.write(fd, "".join(buf).encode())
print(first, time.time_ns(), flush=True)
"""

HEADER = b"jupyter-tiers log_stream bench: reader attached\n"


# ---------------------------------------------------------------------------------------------
# Readers: both record (receive time, payload) per chunk and count lines; analysis comes later
# ---------------------------------------------------------------------------------------------


def job_record(jobdir: Path) -> JobRecord:
    return JobRecord(profile="box", tier="slurm", job_id="1", name="log-stream", jobdir=str(jobdir),
                     world_size=4)


class OursReader:
    """LogFollower (paramiko + the remote follow command + LogDecoder) on a job dir's log."""

    name = "ours"

    def __init__(self, tier, jobdir: Path, on_lines: Callable[[LogBatch], None] | None = None):
        self.batches: list[tuple[int, str]] = []
        self.lines = 0
        self.follower = LogFollower(tier, job_record(jobdir), 0, on_lines or self._record)

    def _record(self, lines: LogBatch) -> None:
        # What a view takes from a batch: its text, decoded in one call (JobView's messages carry
        # it as is). One string per batch: holding 500,000 objects would make this process's
        # memory and garbage collector, not the stream, the thing measured.
        self.batches.append((time.time_ns(), lines.text))
        self.lines += len(lines)

    def start(self) -> None:
        self.follower.start()

    def stop(self) -> None:
        self.follower.stop()

    def first_at(self) -> int:
        return self.batches[0][0]

    def last_at(self) -> int:
        return self.batches[-1][0]

    def received(self) -> list[tuple[int, str]]:
        """(receive time, line text without the rank prefix) of every line."""
        return [(t, text.split(": ", 1)[1] if ": " in text else text)
                for t, joined in self.batches for text in joined.split("\n")[:-1]]


class ChunkReader:
    """Base of the readers that get raw bytes: records (receive time, chunk)."""

    name = ""

    def __init__(self) -> None:
        self.chunks: list[tuple[int, bytes]] = []
        self.lines = 0
        self.thread = threading.Thread(target=self._run, name=f"{self.name}-reader", daemon=True)

    def _chunks(self):  # -> Iterable[bytes]
        raise NotImplementedError

    def _run(self) -> None:
        for data in self._chunks():
            self.chunks.append((time.time_ns(), data))
            self.lines += data.count(b"\n")

    def first_at(self) -> int:
        return self.chunks[0][0]

    def last_at(self) -> int:
        return self.chunks[-1][0]

    def received(self) -> list[tuple[int, str]]:
        out: list[tuple[int, str]] = []
        pending = b""
        for t, data in self.chunks:
            *complete, pending = (pending + data).split(b"\n")
            for raw in complete:
                text = raw.decode()
                out.append((t, text.split(": ", 1)[1] if ": " in text else text))
        return out


class RawReader(ChunkReader):
    """An OpenSSH client running ``tail -c +1 -F FILE``, read with os.read on its stdout."""

    name = "raw ssh"

    def __init__(self, env: dict[str, str], path: Path):
        super().__init__()
        self.argv = ["ssh", "-i", env["JT_SSH_KEY"], "-o", f"UserKnownHostsFile={env['JT_KNOWN_HOSTS']}",
                     "-o", "BatchMode=yes", "-p", env["JT_SSH_PORT"],
                     f"{env['JT_SSH_USER']}@{env['JT_SSH_HOST']}", "tail", "-c", "+1", "-F", str(path)]
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     bufsize=0)
        self.thread.start()

    def _chunks(self):
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while data := os.read(fd, 65536):
            yield data

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.terminate()
        self.proc.wait(10)
        self.thread.join(10)


class StreamReader(ChunkReader):
    """Our transport alone: the tier's log stream (paramiko + remote follow command), no decoding."""

    name = "ours, stream only"

    def __init__(self, tier, jobdir: Path):
        super().__init__()
        self.tier = tier
        self.record = job_record(jobdir)
        self.stream = None

    def start(self) -> None:
        self.stream = self.tier.open_log(self.record, 0)
        self.thread.start()

    def _chunks(self):
        yield from self.stream

    def stop(self) -> None:
        self.stream.close()
        self.thread.join(10)


# ---------------------------------------------------------------------------------------------
# One measured read
# ---------------------------------------------------------------------------------------------


def fresh_log(tag: str) -> Path:
    jobdir = BENCH_DIR / f"log-stream-{os.getpid()}-{tag}"
    shutil.rmtree(jobdir, ignore_errors=True)
    BENCH_DIR.parent.mkdir(mode=0o710, exist_ok=True)  # root's own (0710 as a job workdir), not in /var/tmp
    BENCH_DIR.mkdir(mode=0o700, exist_ok=True)
    jobdir.mkdir()
    (jobdir / "job.log").write_bytes(HEADER)
    return jobdir


def write(path: Path, rate: float, count: int) -> tuple[int, int]:
    """Run the writer to completion; its (first write, last write) time_ns."""
    out = subprocess.run([sys.executable, "-c", WRITER, str(path), str(rate), str(count), str(LINE_PAD)],
                         check=True, capture_output=True, text=True).stdout.split()
    return int(out[0]), int(out[1])


def wait_for(reader, lines: int, timeout: float, idle: float = 15.0) -> bool:
    """Until the reader has ``lines`` lines (True) or nothing came for ``idle`` s / timeout."""
    deadline = time.monotonic() + timeout
    last, last_change = reader.lines, time.monotonic()
    while reader.lines < lines:
        now = time.monotonic()
        if reader.lines != last:
            last, last_change = reader.lines, now
        if now > deadline or now - last_change > idle:
            return False
        time.sleep(0.01)
    return True


def close_reader(reader, path: Path) -> None:
    reader.stop()
    # A remote `tail -F` whose client went away only notices on its next write: give it one.
    time.sleep(0.2)
    with open(path, "ab") as f:
        f.write(b"end\n")
    time.sleep(1.5)  # ours: tail --pid notices the closed channel within a second
    shutil.rmtree(path.parent, ignore_errors=True)


def measure(make_reader: Callable[[Path], object], rate: float, count: int, tag: str) -> dict:
    """Attach a reader to a fresh log, run the writer, collect per-line latency and order."""
    jobdir = fresh_log(tag)
    path = jobdir / "job.log"
    reader = make_reader(jobdir)
    reader.start()
    if not wait_for(reader, 1, 30):
        raise SystemExit(f"{reader.name}: the reader never attached to {path}")
    first, last_write = write(path, rate, count)
    complete = wait_for(reader, count + 1, 120 + count / 10_000)
    received = reader.received()
    size = path.stat().st_size
    close_reader(reader, path)
    res = analyse(received[1:], count, first, complete)
    res["write_rate"] = count / max(1e-9, (last_write - first) / 1e9)
    res["line_bytes"] = (size - len(HEADER)) / count
    return res


def analyse(received: list[tuple[int, str]], count: int, first_write: int, complete: bool) -> dict:
    lat = []
    seqs = []
    for t, text in received:
        fields = text.split(" ", 2)
        seq, stamp = int(fields[0][4:]), int(fields[1][2:])
        seqs.append(seq)
        lat.append((t - stamp) / 1e6)
    expected = range(count)
    unique = set(seqs)
    res = {
        "lines": len(seqs),
        "lost": count - len(unique & set(expected)),
        "dup": len(seqs) - len(unique),
        "in_order": seqs == sorted(seqs),
        "complete": complete,
        "throughput": len(seqs) / ((received[-1][0] - first_write) / 1e9) if received else 0.0,
    }
    res.update(pct(lat))
    return res


def pct(values: list[float]) -> dict:
    if not values:
        return {"p50": float("nan"), "p99": float("nan"), "max": float("nan")}
    s = sorted(values)
    return {"p50": s[len(s) // 2], "p99": s[min(len(s) - 1, int(len(s) * 0.99))], "max": s[-1]}


def backlog(make_reader: Callable[[Path], object], count: int, tag: str) -> float:
    """Lines/s of reading an already-written log of ``count`` lines from offset 0 (first to last
    chunk received, so the OpenSSH client's connection setup is not counted)."""
    jobdir = BENCH_DIR / f"log-stream-{os.getpid()}-{tag}"
    shutil.rmtree(jobdir, ignore_errors=True)
    BENCH_DIR.parent.mkdir(mode=0o710, exist_ok=True)  # root's own (0710 as a job workdir), not in /var/tmp
    BENCH_DIR.mkdir(mode=0o700, exist_ok=True)
    jobdir.mkdir()
    path = jobdir / "job.log"
    write(path, 0, count)
    reader = make_reader(jobdir)
    reader.start()
    wait_for(reader, count, 120 + count / 10_000)
    close_reader(reader, path)
    return reader.lines / ((reader.last_at() - reader.first_at()) / 1e9)


# ---------------------------------------------------------------------------------------------
# Widget path
# ---------------------------------------------------------------------------------------------


def widget_path(tier, rate: float, seconds: float, tag: str) -> dict:
    messages: list[tuple[int, str]] = []  # (sent at, the message as JSON)

    def send(parts: list[LogBatch], skipped: int) -> None:  # what JobView._send_lines sends
        payload = json.dumps(lines_message(parts, skipped))
        messages.append((time.time_ns(), payload))

    jobdir = fresh_log(tag)
    path = jobdir / "job.log"
    batcher = LineBatcher(send, join=list)
    reader = OursReader(tier, jobdir, on_lines=batcher.add)
    reader.start()
    deadline = time.monotonic() + 30
    while not messages:
        if time.monotonic() > deadline:
            raise SystemExit("widget path: the follower never attached")
        time.sleep(0.01)
    messages.clear()
    count = int(rate * seconds)
    cpu0, wall0 = time.process_time(), time.monotonic()
    first, last_write = write(path, rate, count)
    cpu1, wall1 = time.process_time(), time.monotonic()
    size = path.stat().st_size
    deadline = time.monotonic() + 60
    while reader.follower.offset < size and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(2 * batcher.interval)
    batcher.close()
    close_reader(reader, path)

    sent = [(t, json.loads(payload)) for t, payload in messages]
    rows = [(t, m["text"].split("\n")[:-1]) for t, m in sent]
    lat = [(t - int(text.split(" ", 3)[2][2:])) / 1e6 for t, texts in rows for text in texts]
    shown = sum(len(texts) for _t, texts in rows)
    skipped = sum(m["skipped"] for _t, m in sent)
    window = (messages[-1][0] - messages[0][0]) / 1e9 if len(messages) > 1 else 0.0
    res = {
        "messages": len(messages),
        "msg_rate": (len(messages) - 1) / window if window > 0 else float("nan"),
        "max_lines": max((len(texts) for _t, texts in rows), default=0),
        "shown": shown,
        "skipped": skipped,
        "delivered": shown + skipped,
        "count": count,
        "bytes_s": sum(len(p) for _t, p in messages) / window if window > 0 else float("nan"),
        "write_rate": count / ((last_write - first) / 1e9),
        "cpu": 100.0 * (cpu1 - cpu0) / (wall1 - wall0),
    }
    res.update({f"w{k}": v for k, v in pct(lat).items()})
    return res


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------


def med(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def each(runs: list[dict], key: str, fmt: str, scale: float = 1.0) -> str:
    return " ".join(format(r[key] / scale, fmt) for r in runs)


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=1000.0, help="latency phase, lines/s")
    ap.add_argument("--seconds", type=float, default=10.0, help="latency and widget phases")
    ap.add_argument("--burst", type=int, default=500_000, help="throughput phase, lines")
    ap.add_argument("--widget-rate", type=float, default=10_000.0, help="widget phase, lines/s")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    from jupyter_tiers.faces.widgets.job_view import JobView

    log_limit = JobView.class_traits()["log_limit"].default_value
    env = cluster_env()
    tier = box_tier()
    tier.transport.connect()
    readers: dict[str, Callable[[Path], object]] = {
        "ours": lambda jobdir: OursReader(tier, jobdir),
        "raw": lambda jobdir: RawReader(env, jobdir / "job.log"),
        "stream": lambda jobdir: StreamReader(tier, jobdir),
    }
    n = int(args.rate * args.seconds)
    lat: dict[str, list[dict]] = {"ours": [], "raw": []}
    thr: dict[str, list[dict]] = {"ours": [], "raw": [], "stream": []}
    wid: list[dict] = []

    def note(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    try:
        for run in range(args.runs):
            order = ["raw", "ours"] if run % 2 == 0 else ["ours", "raw"]
            for who in order:
                r = measure(readers[who], args.rate, n, f"lat-{who}-{run}")
                lat[who].append(r)
                note(f"run {run + 1} latency {who:>4}: p50 {r['p50']:.2f} ms  p99 {r['p99']:.2f} ms  "
                     f"max {r['max']:.1f} ms  lines {r['lines']}/{n} lost {r['lost']} dup {r['dup']}")
            for who in [*order, "stream"]:
                r = measure(readers[who], 0, args.burst, f"thr-{who}-{run}")
                r["backlog"] = backlog(readers[who], args.burst, f"back-{who}-{run}")
                thr[who].append(r)
                note(f"run {run + 1} throughput {who:>6}: live {r['throughput']:,.0f} lines/s "
                     f"(writer {r['write_rate']:,.0f}/s; lost {r['lost']} dup {r['dup']}), "
                     f"backlog {r['backlog']:,.0f} lines/s")
            w = widget_path(tier, args.widget_rate, args.seconds, f"widget-{run}")
            wid.append(w)
            note(f"run {run + 1} widget: {w['msg_rate']:.2f} msg/s, max {w['max_lines']} lines/msg, "
                 f"p50 {w['wp50']:.0f} ms p99 {w['wp99']:.0f} ms, CPU {w['cpu']:.1f} %, "
                 f"written at {w['write_rate']:,.0f} lines/s")
    finally:
        tier.close()

    o, r = lat["ours"], lat["raw"]
    p99_diff = med(o, "p99") - med(r, "p99")
    live = {k: med(v, "throughput") for k, v in thr.items()}
    back = {k: med(v, "backlog") for k, v in thr.items()}
    bad = sum(x["lost"] + x["dup"] + (not x["in_order"]) for x in thr["ours"] + lat["ours"])
    cpu, wp99, msg_rate = med(wid, "cpu"), med(wid, "wp99"), med(wid, "msg_rate")
    t_ratio = live["ours"] / live["raw"]

    row = "{:<44} {:>11} {:>11} {:>12}   {}"
    print(f"\nLog streaming over ssh to {env['JT_SSH_HOST']}:{env['JT_SSH_PORT']}: median of {args.runs} "
          f"runs; ours and raw back-to-back on separate files, order alternating; lines of "
          f"{med(thr['ours'], 'line_bytes'):.0f} B")
    print(row.format("", "ours", "raw ssh", "ours-raw", "target"))
    print(f"latency, write -> received here, {args.rate:,.0f} lines/s for {args.seconds:g} s, "
          "one write(2) per line")
    print(row.format("  p50 (ms)", f"{med(o, 'p50'):.2f}", f"{med(r, 'p50'):.2f}",
                     f"{med(o, 'p50') - med(r, 'p50'):+.2f}", ""))
    print(row.format("  p99 (ms)", f"{med(o, 'p99'):.2f}", f"{med(r, 'p99'):.2f}", f"{p99_diff:+.2f}",
                     f"ours p99 <= raw p99 + 5 ms: {verdict(p99_diff <= 5)}"))
    print(row.format("  max (ms)", f"{med(o, 'max'):.1f}", f"{med(r, 'max'):.1f}",
                     f"{med(o, 'max') - med(r, 'max'):+.1f}", ""))
    print(f"  {'p99 of each run (ms)':<42} ours {each(o, 'p99', '.2f')}; raw {each(r, 'p99', '.2f')}")
    print(f"throughput, {args.burst:,} lines written as fast as possible in 64 KiB writes "
          f"(writer: {med(thr['raw'], 'write_rate'):,.0f} lines/s)")
    print(row.format("", "ours", "raw ssh", "ours/raw", ""))
    print(row.format("  live lines/s (first write -> last line)", f"{live['ours']:,.0f}",
                     f"{live['raw']:,.0f}", f"{t_ratio:.2f}x", f">= 0.9x raw: {verdict(t_ratio >= 0.9)}"))
    print(f"  {'live k lines/s of each run':<42} ours {each(thr['ours'], 'throughput', '.0f', 1e3)}; "
          f"raw {each(thr['raw'], 'throughput', '.0f', 1e3)}; "
          f"stream only {each(thr['stream'], 'throughput', '.0f', 1e3)}")
    print(row.format("  backlog lines/s (a written file from 0)", f"{back['ours']:,.0f}",
                     f"{back['raw']:,.0f}", f"{back['ours'] / back['raw']:.2f}x", ""))
    print(row.format("  ours stream only, no decoding: live", f"{live['stream']:,.0f}", "",
                     f"{live['stream'] / live['raw']:.2f}x", "(paramiko + remote command)"))
    print(row.format("  ours stream only, no decoding: backlog", f"{back['stream']:,.0f}", "",
                     f"{back['stream'] / back['raw']:.2f}x", ""))
    print(row.format("  ours lost + duplicated + out of order", f"{bad}", "", "",
                     f"no line lost: {verdict(bad == 0)}"))
    print(f"widget path: LogFollower -> LineBatcher -> lines_message + JSON, {args.widget_rate:,.0f} lines/s "
          f"for {args.seconds:g} s (written at {med(wid, 'write_rate'):,.0f}/s)")
    print(row.format("  messages/s", f"{msg_rate:.2f}", "", "", f"<= 10/s: {verdict(msg_rate <= 10)}"))
    print(row.format("  max lines in a message", f"{med(wid, 'max_lines'):.0f}", "", "", ""))
    print(row.format("  lines sent, skipped by the batcher", f"{med(wid, 'shown'):.0f}",
                     f"{med(wid, 'skipped'):.0f}", "", ""))
    print(row.format("  lines accounted for (sent+skipped), written",
                     f"{med(wid, 'delivered'):.0f}", f"{med(wid, 'count'):.0f}", "", ""))
    print(row.format("  message JSON kB/s", f"{med(wid, 'bytes_s') / 1e3:,.0f}", "", "", ""))
    print(row.format("  latency to widget p50 (ms)", f"{med(wid, 'wp50'):.0f}", "", "", ""))
    print(row.format("  latency to widget p99 (ms)", f"{wp99:.0f}", "", "",
                     f"<= 150 ms: {verdict(wp99 <= 150)}"))
    print(row.format("  latency to widget max (ms)", f"{med(wid, 'wmax'):.0f}", "", "", ""))
    print(row.format("  kernel CPU, % of one core", f"{cpu:.1f}", "", "", f"<= 15 %: {verdict(cpu <= 15)}"))
    print(f"  {'kernel CPU of each run':<42} {each(wid, 'cpu', '.1f')}")
    print(row.format("  browser buffer bound (JobView.log_limit)", f"{log_limit} lines", "", "", ""))


if __name__ == "__main__":
    main()
