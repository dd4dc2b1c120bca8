"""Metric parsing on real log formats (PyTorch Lightning, HF Trainer, plain prints), bounded
series, the first error line, and a seeded fuzz of the parser."""

from __future__ import annotations

import math
import random

import pytest

from jupyter_tiers.batch.metrics import (
    MAX_KEYS,
    MetricParser,
    MetricsTracker,
    Series,
    canonical_key,
    first_error_line,
    format_last_values,
    parse_patterns,
    to_frame,
)
from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.core.model import LogLine

# PyTorch Lightning 2.x: a tqdm progress bar that rewrites itself with \r (one log "line" holds
# many updates), the ModelCheckpoint and EarlyStopping messages, and the rich results table of
# trainer.validate().
LIGHTNING = (
    "GPU available: False, used: False\n"
    "TPU available: False, using: 0 TPU cores\n"
    "  | Name  | Type   | Params\n"
    "---------------------------------\n"
    "0 | model | Linear | 11    \n"
    "Sanity Checking DataLoader 0: 100%|██████████| 2/2 [00:00<00:00, 312.19it/s]\n"
    "Epoch 0:   0%|          | 0/64 [00:00<?, ?it/s]\r"
    "Epoch 0:  50%|█████     | 32/64 [00:01<00:01, 24.81it/s, v_num=3, train_loss_step=0.712]\r"
    "Epoch 0: 100%|██████████| 64/64 [00:02<00:00, 26.12it/s, v_num=3, train_loss_step=0.512, "
    "val_loss=0.601, val_acc=0.812, train_loss_epoch=0.655]\n"
    "Epoch 0, global step 64: 'val_loss' reached 0.60123 (best 0.60123), saving model to "
    "'/scratch/ckpt/epoch=0-step=64.ckpt' as top 1\n"
    "Metric val_loss improved. New best score: 0.601\n"
    "Epoch 1: 100%|██████████| 64/64 [00:02<00:00, 27.50it/s, v_num=3, train_loss_step=0.301, "
    "val_loss=0.398, val_acc=0.891, train_loss_epoch=0.355]\n"
    "`Trainer.fit` stopped: `max_epochs=2` reached.\n"
    "┏━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━┓\n"
    "┃      Validate metric      ┃       DataLoader 0        ┃\n"
    "┡━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━┩\n"
    "│          val_acc          │    0.8910000324249268     │\n"
    "│         val_loss          │    0.3981234133243561     │\n"
    "└───────────────────────────┴───────────────────────────┘\n"
)

# transformers' Trainer: its tqdm bar, then one dict per logging step, per evaluation, and the
# train summary at the end.
HF_TRAINER = (
    "  0%|          | 0/30 [00:00<?, ?it/s]\r"
    " 33%|███▎      | 10/30 [00:01<00:02,  9.87it/s]\n"
    "{'loss': 2.3456, 'grad_norm': 4.567123, 'learning_rate': 4.8e-05, 'epoch': 0.33}\n"
    "{'loss': 1.9876, 'grad_norm': 3.21, 'learning_rate': 3.1e-05, 'epoch': 0.67}\n"
    "{'eval_loss': 1.9812, 'eval_accuracy': 0.61, 'eval_runtime': 1.2345, "
    "'eval_samples_per_second': 81.3, 'eval_steps_per_second': 10.2, 'epoch': 1.0}\n"
    "{'loss': 1.5, 'grad_norm': 2.0, 'learning_rate': 1.0e-05, 'epoch': 1.0}\n"
    "{'train_runtime': 12.3456, 'train_samples_per_second': 40.6, 'train_steps_per_second': 5.1, "
    "'train_loss': 2.01, 'epoch': 1.0}\n"
)

PLAIN = (
    "step=1 loss=2.5000 lr=3e-4 tokens/s=12345\n"
    "step=2 loss=2.2500 lr=3e-4 tokens/s=12400\n"
    "iter 3: loss 2.1000, time 12.34ms, mfu 12.34%\n"
    "step:  4  loss:  2.0500  memory:  5.2GiB(5.48%)  tps: 1,234  mfu: 0.93%\n"
    "epoch 1: loss: 1.98, acc: 81.2%, grad_norm: 0.75\n"
    "Step 5/100 | loss: tensor(1.9123, device='cuda:0') | lr: 2.5e-04\n"
)


def _track(text: str, **kw) -> MetricsTracker:
    t = MetricsTracker(**kw)
    t.feed_text("".join(f"0: {ln}\n" for ln in text.splitlines()))
    return t


def test_lightning_progress_bar_checkpoint_and_table() -> None:
    t = _track(LIGHTNING)
    last = t.last_values()
    assert last["val_loss"] == pytest.approx(0.3981234133243561)  # the table's row, last
    assert last["val_acc"] == pytest.approx(0.8910000324249268)
    assert last["train_loss_step"] == pytest.approx(0.301)
    assert last["train_loss_epoch"] == pytest.approx(0.355)
    assert last["it/s"] == pytest.approx(27.50)
    assert "v_num" not in last  # not a metric
    # Every \r-separated update is one reading: 0.712, 0.512, then 0.301.
    assert [y for _, y in t.to_lists()["train_loss_step"]] == pytest.approx([0.712, 0.512, 0.301])
    assert t.series["step"].last == 64  # "global step 64"; the path's step=64 is not read twice
    assert t.main() == ("train_loss_step", pytest.approx(0.301))


def test_hf_trainer_dict_lines() -> None:
    t = _track(HF_TRAINER)
    last = t.last_values()
    assert [y for _, y in t.to_lists()["loss"]] == [2.3456, 1.9876, 1.5]
    assert last["lr"] == pytest.approx(1.0e-05)  # learning_rate -> lr
    assert last["grad_norm"] == 2.0
    assert last["val_loss"] == pytest.approx(1.9812)  # eval_loss -> val_loss
    assert last["val_acc"] == pytest.approx(0.61)
    assert last["train_loss"] == pytest.approx(2.01)
    assert last["epoch"] == 1.0
    assert last["it/s"] == pytest.approx(9.87)
    assert not any("runtime" in k or "samples" in k for k in last)
    assert t.main() == ("loss", 1.5)


def test_plain_prints() -> None:
    t = _track(PLAIN)
    lists = t.to_lists()
    assert [x for x, _ in lists["loss"]] == [1, 2, 3, 4, 5]  # x is the step; two readings at 4: one point
    assert lists["loss"][3][1] == pytest.approx(1.98)  # the later reading, a real one (issue 41 item 5)
    assert t.last_values()["loss"] == pytest.approx(1.9123)  # last exact, not merged
    assert [y for _, y in lists["tokens/s"]] == [12345, 12400, 1234]
    assert t.last_values()["lr"] == pytest.approx(2.5e-4)
    assert t.last_values()["acc"] == pytest.approx(81.2)
    assert t.last_values()["step"] == 5  # "Step 5/100"


@pytest.mark.parametrize("line, expected", [
    ("loss=0.5", {"loss": 0.5}),
    ("'loss': '0.25'", {"loss": 0.25}),
    ('"val_loss": 1e-3', {"val_loss": 0.001}),
    ("train/loss: 0.7 val/acc: 0.9", {"train_loss": 0.7, "val_acc": 0.9}),
    ("loss: nan", {"loss": math.nan}),
    ("my_loss_function=3 closs=4 lossy=5", {}),
    ("rank=0 world_size=8 port: 29500", {}),
    ("saving to /ckpt/epoch=3-step=9.ckpt", {}),
    ("lr=3e-4 tokens/s", {"lr": 3e-4}),
    ("1234.5 tokens/s", {"tokens/s": 1234.5}),
    # DeepSpeed's engine log
    ("[Rank 0] step=10, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]", {"step": 10, "lr": 1e-4}),
    # Megatron-LM's iteration line
    (" iteration       10/     100 | consumed samples:          320 | elapsed time per iteration (ms): "
     "1234.5 | learning rate: 1.500E-04 | global batch size:    32 | lm loss: 8.123456E+00 | "
     "loss scale: 1.0 | grad norm: 3.456 | number of skipped iterations:   0 |",
     {"step": 10, "lr": 1.5e-4, "loss": 8.123456, "grad_norm": 3.456}),
    ("Namespace(lr=0.001, epochs=10)", {"lr": 0.001}),
    ("Epoch 3/10", {"epoch": 3}),
    ("", {}),
])
def test_single_lines(line: str, expected: dict[str, float]) -> None:
    got = MetricParser().parse(line)
    assert got.keys() == expected.keys()
    for k, v in expected.items():
        assert got[k] == pytest.approx(v, nan_ok=True)


def test_canonical_keys() -> None:
    assert canonical_key("learning_rate") == "lr"
    assert canonical_key("'eval_loss'") == "val_loss"
    assert canonical_key("train_loss_step") == "train_loss_step"
    assert canonical_key("global_step") == "step"
    assert canonical_key("v_num") is None and canonical_key("loss_scale_x") is None


def test_rank_selection_and_other_ranks_ignored() -> None:
    lines = [LogLine("loss=1.0", 0), LogLine("loss=9.0", 1), LogLine("loss=2.0", 0),
             LogLine("srun: loss=7", None)]
    t0 = MetricsTracker()
    t0.feed(lines)
    assert [y for _, y in t0.to_lists()["loss"]] == [1.0, 2.0]
    t1 = MetricsTracker(rank=1)
    t1.feed(lines)
    assert [y for _, y in t1.to_lists()["loss"]] == [9.0]


def test_custom_patterns_add_and_replace() -> None:
    pats = parse_patterns(["loss=LOSS<([0-9.]+)>", r"ppl=perplexity is (?P<value>\d+\.\d+)"])
    t = MetricsTracker(pats)
    t.feed([LogLine("LOSS<0.75> loss=123", 0), LogLine("the perplexity is 12.5 now", 0)])
    assert t.last_values() == {"loss": 0.75, "ppl": 12.5}  # the custom loss wins over loss=123
    assert t.main() == ("loss", 0.75)  # a custom key is the main metric
    only = MetricsTracker(pats, defaults=False)
    only.feed([LogLine("lr=0.1 LOSS<0.5>", 0)])
    assert only.last_values() == {"loss": 0.5}


@pytest.mark.parametrize("bad, words", [
    ("loss", "KEY=REGEX"),
    ("=x(1)", "KEY=REGEX"),
    ("1loss=(x)", "not a metric name"),
    ("loss=(unclosed", "not a valid regex"),
    ("loss=no group", "group"),
    ("loss=" + "(a)" * 200, "1 to 500"),
    ("bad key=(1)", "not a metric name"),
])
def test_bad_patterns_are_short_spec_errors(bad: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_patterns([bad])
    assert err.value.field == "metrics" and words in str(err.value)
    assert len(str(err.value)) < 200


def test_profile_mapping_form_and_bounds() -> None:
    assert parse_patterns({"loss": r"L=(\S+)"}) == (("loss", r"L=(\S+)"),)
    with pytest.raises(SpecError):
        parse_patterns({"loss": 3})
    with pytest.raises(SpecError, match="at most 32"):
        parse_patterns([f"k{i}=(x)" for i in range(33)])
    with pytest.raises(SpecError):
        parse_patterns(7)


def test_series_stays_bounded_and_keeps_shape() -> None:
    s = Series(max_points=100)
    for i in range(100_000):
        s.add(float(i), float(i) * 2)
    points = s.points()
    assert 50 <= len(points) <= 100 and len(s.xs) < 100
    assert s.count == 100_000 and s.last == 199_998.0 and s.last_x == 99_999.0
    assert s.readings == 100_000  # every reading is in exactly one point
    xs = [x for x, _ in points]
    assert xs == sorted(xs) and xs[0] < 2048 and xs[-1] > 99_999 - 2048
    # Every point is a real reading (issue 41 item 5): y = 2x exactly, at a whole step, and every
    # full point stands for the same number of readings; the last point is the last reading.
    for x, y in points:
        assert y == 2 * x and x == int(x)
    assert len(set(s.weights)) == 1
    assert points[-1] == (99_999.0, 199_998.0)


def test_the_last_point_is_the_last_reading_at_its_real_step() -> None:
    """Issue 41 item 5: the legend read ``step 285.5 · loss 0.0588`` (a mean of a downsampled pair)
    while rank 0's last line was ``step 286 loss 0.0514``."""
    s = Series(max_points=64)
    for step in range(1, 287):
        s.add(float(step), 1.0 / step)
    assert s.points()[-1] == (286.0, 1.0 / 286)
    assert all(x == int(x) and y == 1.0 / x for x, y in s.points())


def test_nan_survives_merging() -> None:
    s = Series(max_points=4)
    for y in [1.0, math.nan, 3.0, 4.0, 5.0]:
        s.add(float(s.count), y)
    assert any(math.isnan(y) for y in s.ys)


def test_tracker_bounds_keys() -> None:
    pats = tuple((f"k{i}", rf"k{i}=(\d+)") for i in range(30))
    t = MetricsTracker(pats)
    text = " ".join(f"k{i}=1" for i in range(30)) + " " + " ".join(
        f"{p}_{b}{x}=1" for p in ("train", "val", "test") for b in ("loss", "acc", "ppl", "lr", "grad_norm")
        for x in ("", "_step", "_epoch"))
    t.feed([LogLine(text + " loss=1 lr=1 step=1 epoch=1", 0)])
    assert len(t.series) == MAX_KEYS


@pytest.mark.parametrize("line, expected", [
    ("RuntimeError: CUDA error: out of memory", "RuntimeError: CUDA error: out of memory"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"),
    ("KeyboardInterrupt", "KeyboardInterrupt"),
    ("    raise ValueError('x')", None),
    ("Traceback (most recent call last):", None),
    ("UserWarning: something", None),
    ("loss=0.5", None),
])
def test_first_error_line(line: str, expected: str | None) -> None:
    assert first_error_line(line) == expected


def test_first_error_prefers_the_exception_over_srun() -> None:
    log = (
        "0: step=1 loss=2.0\n"
        "srun: error: node2: task 1: Exited with exit code 1\n"
        "1: Traceback (most recent call last):\n"
        '1:   File "/jobs/main.py", line 7, in <module>\n'
        "1:     x = torch.empty(1 << 40, device='cuda')\n"
        "1: RuntimeError: CUDA error: out of memory\n"
        "0: ValueError: second\n"
    )
    t = MetricsTracker()
    t.feed_text(log)
    assert t.error == "RuntimeError: CUDA error: out of memory"
    # Slurm's reports of an exit or a cancel are not a cause (the summary names the exit);
    # its OOM report is.
    slurm = MetricsTracker()
    slurm.feed_text("srun: error: node2: task 1: Exited with exit code 1\n"
                    "slurmstepd: error: *** STEP 5.0 ON node1 CANCELLED AT 2026-12-02T22:08:26 ***\n"
                    # fail-stop's SIGKILL of ranks that outlived SIGTERM (a busy node): one task or a range
                    "srun: error: node1: task 2: Killed\n"
                    "srun: error: node1: tasks 0-1: Killed\n"
                    "srun: error: node3: tasks 4,6-7: Terminated\n")
    assert slurm.error is None
    slurm.feed_text("slurmstepd: error: Detected 1 oom_kill event in StepId=7.0. Some of the step "
                    "tasks have been OOM Killed.\n")
    assert slurm.error is not None and slurm.error.startswith("slurmstepd: error: Detected 1 oom_kill")


def test_formats_and_frame_or_lists() -> None:
    t = _track(PLAIN)
    text = format_last_values(t.last_values())
    assert text.startswith("step 5, loss 1.912, lr 0.00025") and "tokens/s 1234" in text
    frame = to_frame(t.to_lists())
    try:
        import pandas  # noqa: F401
    except ImportError:
        assert frame == t.to_lists()
    else:
        assert list(frame.columns)[:2] == ["loss", "lr"] and frame.index.name == "step"
        assert list(frame.index) == [1, 2, 3, 4, 5]
        assert frame["loss"].dropna().iloc[-1] == pytest.approx(1.9123)
    assert t.chart_data()["loss"][0] == [1, 2.5]
    nan = MetricsTracker()
    nan.feed([LogLine("loss=nan", 0)])
    assert nan.chart_data() == {"loss": [[1.0, None]]}  # JSON has no NaN


def _random_line(rng: random.Random) -> str:
    pieces = ["loss", "=", ":", " ", "'", '"', "1e", "-", "+", ".", "5", "0", "nan", "inf", "it/s",
              "tokens/s", "│", "|", "\r", "tensor(", "Error", "step", "epoch", "lr", "reached",
              "New best score: ", "ü", "\x00", ",", "123,456", "val_", "train/", "_step", "{", "}"]
    n = rng.randint(0, 40)
    return "".join(rng.choice(pieces) if rng.random() < 0.8 else chr(rng.randint(1, 0x2FFF))
                   for _ in range(n))


def test_fuzz_parser_never_raises_and_stays_bounded() -> None:
    rng = random.Random(1234)
    tracker = MetricsTracker(parse_patterns([r"custom=c(\d+)"]), max_points=50)
    parser = MetricParser()
    for _ in range(20_000):
        line = _random_line(rng)
        found = parser.parse(line)
        assert all(isinstance(k, str) and isinstance(v, float) for k, v in found.items())
        tracker.feed_line(line, rng.choice([0, 0, 1, None]))
    assert len(tracker.series) <= MAX_KEYS
    assert all(len(s.xs) < 50 for s in tracker.series.values())
    assert tracker.error is None or len(tracker.error) <= 200
    # A huge line is read only at its start.
    assert parser.parse("x" * 1_000_000 + " loss=1") == {}


def test_feed_sampled_bounds_the_parsing_but_sees_every_error() -> None:
    text = "".join(f"0: step={i} loss={1 / (i + 1):.6f}\n1: step={i} loss=9\n" for i in range(5000))
    text += "1: ValueError: late\n0: step=5000 loss=0.5\n"
    t = MetricsTracker()
    t.feed_sampled(text, budget=100)
    assert t.series["loss"].count == 100  # only the last 100 of rank 0's lines were parsed
    assert t.last_values() == {"step": 5000.0, "loss": 0.5}
    assert t.error == "ValueError: late"  # every line was checked for an error


def test_fuzz_metric_patterns_option() -> None:
    """Random --metrics values: a short SpecError naming 'metrics', or checked pairs whose regex
    compiles with a group — never another exception."""
    rng = random.Random(99)
    alphabet = "lossacc_=()[]{}\\.*+?|^$-/ dS\x00é"
    ok = 0
    for _ in range(5000):
        n = rng.randint(0, 4)
        items = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20))) for _ in range(n)]
        value: object = items if rng.random() < 0.8 else dict(zip(items, items[::-1], strict=False))
        try:
            pairs = parse_patterns(value)
        except SpecError as exc:
            assert exc.field == "metrics" and len(str(exc)) < 300
            continue
        ok += 1
        for key, regex in pairs:
            import re

            assert re.compile(regex).groups >= 1 and key
            MetricParser(pairs).parse("loss=1 acc: 2 (3)")  # usable at once
    assert ok > 50
