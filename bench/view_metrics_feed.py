"""What a live JobView pays to read metrics from every log batch (since the fix that feeds the
metrics from the follower's batches, not the display's trimmed messages), against the follower's
own decoding of the same bytes, in one process.

The log is bench/metrics_parse.py's synthetic 8-rank training log, cut into 64 KiB chunks as the
local tier's follower reads them (the Slurm tier's relay coalesces similarly under load).

- baseline: ``LogDecoder.feed`` of every chunk (the follower's own work for every line);
- view, no error yet: ``RankMetrics.feed`` of every chunk, parsed in full 8 times a second and
  deferred in between (RankMetrics.feed_batch), at a given log rate; every chunk is searched for
  the 12 substrings an error line must hold (str.find each), which is the cost that grows with
  the rate (this log has none, so no line is split for it);
- view, after an error: the same once the log's first error is known (only a restart marker's
  em dash is searched for).
- before the fix, for comparison: the old path, ``feed_sampled`` on each display message (at
  most 8 a second, each the newest 1,000 lines), every line of it split and checked.

- view with a hint word: every chunk gets one harmless line with "Exit" in it (no error);
- before the speed-up, same process: the view with commit 384643c's ``feed_sampled`` (a batch
  holding any error hint word checked line by line, else 13 substring scans and splitlines of the
  whole batch), against which the current view's time is given as a ratio.

Prints per-line costs and % of one core at 10k, 100k and 1M lines/s. Nothing is asserted.

Run: .venv/bin/python bench/view_metrics_feed.py [--lines 400000] [--runs 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.metrics_parse import best, make_log
from jupyter_tiers.batch.logs import LogDecoder, split_log_line
from jupyter_tiers.batch.metrics import MetricsTracker
from jupyter_tiers.engine.rank_metrics import RankMetrics

CHUNK = 1 << 16


def chunks_of(data: bytes) -> list[bytes]:
    out, i = [], 0
    while i < len(data):
        j = data.rfind(b"\n", i, i + CHUNK) + 1 or len(data)
        out.append(data[i:j])
        i = j
    return out


def old_feed_sampled(tracker: MetricsTracker, text: str, budget: int = 200) -> None:
    """feed_sampled before the fix: every line split and checked for an error."""
    mine = []
    for raw in text.splitlines():
        rank, body = split_log_line(raw)
        tracker._check_error(body)
        if rank == tracker.rank:
            mine.append(body)
    for body in mine[-budget:]:
        tracker._parse_into(body)


_EXC_HINTS = ("Error", "Exception", "Interrupt", "Exit", "Failure")
_ERROR_HINTS = ("rror", "RROR", "FATAL", "Segmentation", "oom", "OOM", "Out Of Memory", "Killed")


class Tracker384643c(MetricsTracker):
    """MetricsTracker with feed_sampled as commit 384643c had it (the baseline of the speed-up)."""

    def feed_sampled(self, text: str, budget: int = 200, *, defer: bool = False) -> None:
        mine: list[str] = []
        lines = text.splitlines()
        if self._may_hold_error(text):
            for raw in lines:
                rank, body = split_log_line(raw)
                self._check_error(body)
                if rank == self.rank or self.rank is None:
                    mine.append(body)
        else:
            prefix = f"{self.rank}:"
            for raw in reversed(lines):
                if self.rank is not None and not raw.startswith((prefix, "0")):
                    continue
                rank, body = split_log_line(raw)
                if rank == self.rank or self.rank is None:
                    mine.append(body)
                    if len(mine) >= budget:
                        break
            mine.reverse()
        if defer:
            if mine:
                self._deferred = mine[-budget:]
            return
        self.flush_deferred()
        for body in mine[-budget:]:
            self._parse_into(body)

    def _may_hold_error(self, text: str) -> bool:
        if "— restart " in text:
            return True
        if self.first_error is not None:
            return False
        return any(h in text for h in _EXC_HINTS) or (
            self._other_error is None and any(h in text for h in _ERROR_HINTS))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=400_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    data = make_log(args.lines)
    chunks = chunks_of(data)
    texts = [c.decode() for c in chunks]
    n = data.count(b"\n")
    per_chunk = n / len(chunks)

    def baseline() -> None:
        decoder = LogDecoder(0)
        for c in chunks:
            decoder.feed(c)

    # The same chunks with one harmless line holding an error hint word ("Exit") each: 384643c
    # then split and checked every line of the chunk; the search now checks only that line.
    hinted = [text + "3: data loader worker Exiting (end of shard)\n" for text in texts]

    def view(every: int, errored: bool, old: bool = False, hint: bool = False) -> None:
        metrics = RankMetrics(max_points=200)
        if old:
            metrics.summary = metrics.chart = Tracker384643c(rank=0, max_points=200)
        if errored:
            metrics.summary.first_error = "ValueError: seen before"
        for k, text in enumerate(hinted if hint else texts):
            metrics.feed(text, None, defer=k % every != 0)
        metrics.feed("")

    base = best(baseline, args.runs) / n
    message = "".join(data.decode().splitlines(keepends=True)[:1000])
    old_msg = best(lambda: old_feed_sampled(MetricsTracker(rank=0), message), args.runs)
    print(f"{n:,} lines in {len(chunks)} chunks of 64 KiB ({per_chunk:.0f} lines each), best of {args.runs}")
    print(f"  baseline LogDecoder.feed: {base * 1e6:.2f} us a line")
    for rate in (10_000, 100_000, 1_000_000):
        chunks_per_s = rate / per_chunk
        every = max(1, round(chunks_per_s / 8))  # a full parse 8 times a second
        for errored in (False, True):
            cost = best(lambda e=every, err=errored: view(e, err), args.runs) / n
            was = best(lambda e=every, err=errored: view(e, err, old=True), args.runs) / n
            label = "after an error" if errored else "no error yet  "
            print(f"  view at {rate:>9,} lines/s, {label}: {cost * 1e6:.2f} us a line, "
                  f"{cost / base:.2f}x the baseline's time, {cost * rate * 100:.1f} % of a core; "
                  f"384643c: {was * rate * 100:.1f} % ({was / cost:.1f}x the time)")
        cost = best(lambda e=every: view(e, False, hint=True), args.runs) / n
        was = best(lambda e=every: view(e, False, old=True, hint=True), args.runs) / n
        print(f"  view at {rate:>9,} lines/s, a hint word in every chunk: {cost * rate * 100:.1f} % "
              f"of a core; 384643c: {was * rate * 100:.1f} % ({was / cost:.1f}x the time)")
        old = min(8, rate / 1000) * old_msg
        print(f"  before the fix at {rate:>9,} lines/s: {old * 100:.1f} % of a core "
              f"(but lines beyond 8,000/s never reached the metrics or the error check)")


if __name__ == "__main__":
    main()
