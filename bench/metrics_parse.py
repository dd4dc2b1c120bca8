"""Cost of reading metrics from a log, against the cost of decoding that log.

A synthetic 8-rank training log (rank-prefixed, as the rank shim writes it) mixing the formats
jupyter_tiers.batch.metrics reads — ``key=value`` prints, HF Trainer dict lines, Lightning progress
bars with ``\\r`` updates — with plain lines that carry no metric (3 in 4 lines). Measured in
one process, best of ``--runs``:

- baseline: ``LogDecoder.feed`` + iterating the LogLines (what the watcher and the text view
  already pay for every line);
- metrics: ``MetricsTracker.feed`` over the same LogLines (rank 0's lines parsed, every line
  checked for an error);
- metrics from text: ``MetricsTracker.feed_text`` over the raw text (what a view that only has
  the batch text pays).

- metrics the widget's way: ``feed_sampled`` on 1,250-line batches (10,000 lines/s in 8
  messages a second): every line checked for an error, the newest 200 of rank 0 parsed.

Then the same with one rank, where every line is parsed (the worst case).

Prints lines/s of each and the ratio to the baseline. Nothing is asserted.

Run: .venv/bin/python bench/metrics_parse.py [--lines 400000] [--runs 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jupyter_tiers.batch.logs import LogDecoder
from jupyter_tiers.batch.metrics import MetricsTracker


def make_log(lines: int, ranks: int = 8) -> bytes:
    out = []
    for i in range(lines):
        rank = i % ranks
        step = i // ranks
        kind = (i // ranks) % 4
        loss = 1.0 / (step + 1)
        if kind == 0:
            out.append(f"{rank}: step={step} loss={loss:.4f} lr=3e-4 grad_norm=0.91 tokens/s=12345")
        elif kind == 1:
            out.append(f"{rank}: {{'loss': {loss:.4f}, 'grad_norm': 1.2, "
                       f"'learning_rate': 4.8e-05, 'epoch': {step / 1000:.2f}}}")
        elif kind == 2:
            out.append(f"{rank}: Epoch 0:  50%|█████     | {step}/9999 [00:01<00:01, 24.81it/s, v_num=3, "
                       f"train_loss_step=0.412]\rEpoch 0:  51%|█████     | {step + 1}/9999 [00:01<00:01, "
                       f"24.90it/s, v_num=3, train_loss_step=0.410]")
        else:
            out.append(f"{rank}: [2026-12-02 22:30:00,123] INFO data loader worker {rank} "
                       f"fetched shard {step}")
    return ("\n".join(out) + "\n").encode()


def best(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def run(lines: int, ranks: int, runs: int) -> None:
    data = make_log(lines, ranks)
    text = data.decode()
    decoded = list(LogDecoder(0).feed(data))

    def baseline() -> None:
        for _line in LogDecoder(0).feed(data):
            pass

    # The widget's way: batches of 1,250 lines (10,000 lines/s in 8 messages a second), each
    # checked for errors but only its newest 200 lines of rank 0 parsed.
    raw_lines = text.splitlines(keepends=True)
    batches = ["".join(raw_lines[i:i + 1250]) for i in range(0, len(raw_lines), 1250)]

    def sampled() -> None:
        tracker = MetricsTracker()
        for batch in batches:
            tracker.feed_sampled(batch)

    base = best(baseline, runs)
    met = best(lambda: MetricsTracker().feed(decoded), runs)
    met_text = best(lambda: MetricsTracker().feed_text(text), runs)
    met_sampled = best(sampled, runs)
    print(f"{lines:,} lines, {len(data) / 1e6:.1f} MB, {ranks} rank(s) (rank 0's parsed), best of {runs}")
    print(f"  baseline LogDecoder + LogLines    : {lines / base:>10,.0f} lines/s")
    print(f"  MetricsTracker.feed (LogLines)    : {lines / met:>10,.0f} lines/s  "
          f"{met / base:.2f}x the baseline's time")
    print(f"  MetricsTracker.feed_text (raw text): {lines / met_text:>9,.0f} lines/s  "
          f"{met_text / base:.2f}x the baseline's time")
    print(f"  MetricsTracker.feed_sampled (widget): {lines / met_sampled:>8,.0f} lines/s  "
          f"{met_sampled / base:.2f}x the baseline's time")
    for label, took in (("text view (every line)", met), ("widget (sampled batches)", met_sampled)):
        per_line_us = took / lines * 1e6
        print(f"  {label} at 10,000 lines/s: about {per_line_us * 10_000 / 1e4:.1f} % of a core "
              f"({per_line_us:.2f} us a line)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=400_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    run(args.lines, 8, args.runs)
    run(args.lines // 4, 1, args.runs)  # every line is rank 0's: the worst case


if __name__ == "__main__":
    main()
