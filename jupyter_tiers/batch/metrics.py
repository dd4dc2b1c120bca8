"""Training metrics read from log lines, kept as bounded series (pure: no I/O).

What is recognised by default, in one rank's lines (rank 0 unless another is chosen):

- ``key=value`` and ``key: value`` pairs (quotes around the key or value allowed, as in HF
  Trainer's ``{'loss': 0.1234, 'learning_rate': 5e-05, 'epoch': 0.5}`` dict lines), and for the
  step-like keys also ``key value`` (``iter 100: loss 2.31``), for the common keys: loss, val_loss,
  lr, acc, grad_norm, tokens/s, it/s, step, epoch, with ``train_``/``val_``/``eval_``/``test_``
  prefixes and Lightning's ``_step``/``_epoch`` suffixes;
- a number followed by a rate unit (tqdm's ``24.81it/s``, ``1234 tokens/s``);
- Lightning's checkpoint and early-stopping messages (``'val_loss' reached 0.398``) and its
  result tables (``│ val_loss │ 0.398 │``).

Custom patterns (``--metrics "loss=REGEX"``, or a profile's ``metrics`` default) add keys or
replace the default reading of a key: the regex's first group (or a group named ``value``) is
the number. They run in RE2 (linear_regex.py), so no pattern's work grows faster than the line.

A series keeps fewer than ``max_points`` points: when full, neighbouring points are merged
(each point is the mean x and mean y of the readings it holds, and every point holds as many),
so memory stays bounded for a week-long run while the curve keeps its shape; the last value of
every key is kept exactly. ``x`` is the last ``step`` the log showed, else the reading's number.

Also: the first error line of the log (any rank), for a failed job's summary.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import SpecError
from ..core.model import LogLine
from .linear_regex import LinearPattern, LinearRegexError, compile_linear
from .logs import split_log_line
from .requeue import marker_restart

#: The keys recognised without any configuration (canonical names).
DEFAULT_KEYS = ("loss", "val_loss", "lr", "acc", "grad_norm", "tokens/s", "it/s", "step", "epoch")
#: Preferred main metric, first match wins (the summary line shows its last value).
MAIN_PREFERENCE = ("loss", "train_loss", "train_loss_step", "val_loss", "train_loss_epoch")

MAX_KEYS = 64  # distinct keys kept per job (more are ignored)
MAX_PATTERNS = 32
MAX_PATTERN_LEN = 500
DEFAULT_MAX_POINTS = 1000
_MAX_LINE = 4096  # characters of a line looked at (a 1 MB progress line is not a metric)

_ALIASES = {
    "learning_rate": "lr",
    "accuracy": "acc",
    "eval_loss": "val_loss",
    "valid_loss": "val_loss",
    "validation_loss": "val_loss",
    "eval_acc": "val_acc",
    "eval_accuracy": "val_acc",
    "val_accuracy": "val_acc",
    "train_accuracy": "train_acc",
    "gradient_norm": "grad_norm",
    "grad-norm": "grad_norm",
    "global_step": "step",
    "iter": "step",
    "iteration": "step",
    "tps": "tokens/s",
    "tok/s": "tokens/s",
    "tokens_per_second": "tokens/s",
    "tokens_per_sec": "tokens/s",
    "throughput": "tokens/s",
    "its": "it/s",
}
_BASES = {"loss", "acc", "lr", "grad_norm", "ppl", "perplexity"}
_PREFIX_RE = re.compile(r"^(train|val|eval|test)[_/](.+)$")
_SUFFIX_RE = re.compile(r"^(.+?)_(step|epoch)$")

# A number: 1,234 (thousands, only before a separator), 3e-4, .5, 12., nan, inf.
_NUM = (r"[-+]?(?:\d{1,3}(?:,\d{3})+(?=[\s;|)\]}]|$)|\d+\.?\d*(?:[eE][-+]?\d+)?"
        r"|\.\d+(?:[eE][-+]?\d+)?|nan|NaN|NAN|inf|Inf|INF)")
# key=value, key: value, 'key': value, "key": "value"; value maybe tensor(...) or N/M.
_PAIR_RE = re.compile(
    r"(?<![\w./-])['\"]?(?P<key>[A-Za-z_][\w./-]{0,63})['\"]?\s*[=:]\s*(?:tensor\(|\[)?['\"]?"
    r"(?P<val>" + _NUM + r")(?![\w.])"
)
_SPACE_RE = re.compile(
    r"(?<![\w./-])(?P<key>step|epoch|iter|iteration|loss|lr)\s+(?P<val>" + _NUM + r")(?![\w.])",
    re.IGNORECASE,
)
# Megatron-LM's words: "learning rate: 1.500E-04 | ... | lm loss: 8.1E+00 | grad norm: 3.4".
_TWO_WORD_RE = re.compile(
    r"\b(?P<key>learning rate|grad norm|lm loss)\s*[:=]\s*(?P<val>" + _NUM + r")(?![\w.])")
_TWO_WORD_KEYS = {"learning rate": "lr", "grad norm": "grad_norm", "lm loss": "loss"}
_RATE_RE = re.compile(
    r"(?<![\w.+-])(?P<val>\d+\.?\d*)\s?(?P<key>it/s|s/it|tokens/s|tok/s|samples/s)(?![\w/=:])"
)
_LIGHTNING_RE = re.compile(
    r"'(?P<key>[\w./-]{1,64})' reached (?P<val>" + _NUM + r")"
    r"|Metric (?P<key2>[\w./-]{1,64}) improved.*?New best score: (?P<val2>" + _NUM + r")"
)
_TABLE_RE = re.compile(r"^\s*[│|┃]\s*(?P<key>[\w./-]{1,64})\s*[│|┃]\s*(?P<val>" + _NUM + r")\s*[│|┃]")
_KEY_RE = re.compile(r"[A-Za-z_][\w./-]{0,63}")

# The line that says what went wrong: a Python exception line (the last line of a traceback,
# ``RuntimeError: CUDA error: out of memory``) first; failing that, another error report.
_EXC_RE = re.compile(
    r"^\s*(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit|Failure)\b(?::.*)?$"
)
_OTHER_ERROR_RE = re.compile(
    r"\b[Ee]rror:|\bERROR:|\bFATAL\b|Segmentation fault|\b(?:oom|OOM)[-_ ][Kk]ill|Out Of Memory|Killed\b"
)
# Plain substring tests first: most lines have none of these, and `in` is far cheaper than a
# regex search (38 us a line for the search alone, bench/metrics_parse.py).
_ERROR_HINTS = ("rror", "RROR", "FATAL", "Segmentation", "oom", "OOM", "Out Of Memory", "Killed")
_EXC_HINTS = ("Error", "Exception", "Interrupt", "Exit", "Failure")
# Slurm's own reports of what the summary already says (a rank's exit, a cancel): not the cause.
# srun names one task or a range of them ("task 3: Killed", "tasks 0-1: Killed": fail-stop's SIGKILL
# of ranks that outlived their SIGTERM on a busy node).
_NOT_A_CAUSE_RE = re.compile(r"Exited with exit code|CANCELLED AT|DUE TO TIME LIMIT|tasks? \d[\d,-]*: "
                             r"(?:Killed|Terminated)|Job step aborted|Terminating (?:StepId|job step)|"
                             r"Force Terminated")
_ERROR_LEN = 200
# What feed_sampled searches a whole batch for (each a C-speed str.find; one regex alternation
# over a batch measured 1.6-6x slower than all the finds) to find the few lines _check_error must
# see, by error state: always a restart marker; an exception line (_EXC_RE needs an _EXC_HINTS
# word) while there is no first error; another error report while there is none either: every
# _OTHER_ERROR_RE match holds one of _OTHER_NEEDLES (keep them in step). Fewer, longer needles
# search faster: "rror" covers "Error" and "error:", "Kill"/"kill" both OOM-kill forms and "Killed".
_RESTART_NEEDLES = ("—",)  # of "— restart N —"; one char: a memchr-fast search
_OTHER_NEEDLES = ("rror", "RROR:", "FATAL", "Segmentation fault", "Kill", "kill", "Out Of Memory")
_EXC_NEEDLES = _RESTART_NEEDLES + _EXC_HINTS
_ALL_NEEDLES = _RESTART_NEEDLES + _OTHER_NEEDLES + tuple(
    h for h in _EXC_HINTS if not any(e in h for e in _OTHER_NEEDLES))
# A needle's character that is rare in logs (a capital, x, k): found by a memchr-fast one-char
# search first, so a batch without it costs ~1 us instead of a full search for the needle.
_ANCHORS = {"RROR:": "R", "FATAL": "L", "Segmentation fault": "S", "Kill": "K", "kill": "k",
            "Out Of Memory": "M", "Exception": "x", "Exit": "x", "Interrupt": "I", "Failure": "F"}


def _find(text: str, needle: str, pos: int) -> int:
    """``text.find(needle, pos)``, started at the first place its anchor character allows."""
    anchor = _ANCHORS.get(needle)
    if anchor is not None:
        j = needle.index(anchor)
        at = text.find(anchor, pos + j)
        if at < 0:
            return -1
        pos = at - j  # the needle's first occurrence from pos has its anchor at or after ``at``
    return text.find(needle, pos)


@functools.lru_cache(maxsize=4096)  # a log repeats the same few keys on every line
def canonical_key(key: str) -> str | None:
    """The canonical name of a default metric key, or None when it is not one we read.

    ``learning_rate`` -> ``lr``, ``eval_loss`` -> ``val_loss``, ``train/loss`` -> ``train_loss``,
    ``train_loss_step`` stays itself; ``v_num`` or ``rank`` -> None.
    """
    k = key.strip("'\"").lower()
    k = _ALIASES.get(k, k)
    if k in DEFAULT_KEYS:
        return k
    m = _PREFIX_RE.match(k)
    rest, prefix = (m.group(2), m.group(1)) if m else (k, "")
    suffix = ""
    s = _SUFFIX_RE.match(rest)
    if s and _ALIASES.get(s.group(1), s.group(1)) in _BASES:
        rest, suffix = s.group(1), "_" + s.group(2)
    rest = _ALIASES.get(rest, rest)
    if rest not in _BASES:
        return None
    if prefix in ("val", "eval"):
        prefix = "val"
    name = f"{prefix}_{rest}" if prefix else rest
    return name + suffix


def _number(text: str) -> float | None:
    text = text.strip("'\"").replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class MetricPattern:
    """A custom pattern: ``key`` is read from lines where ``regex`` matches (group 1, or the
    group named ``value``, is the number)."""

    key: str
    regex: str

    def compiled(self) -> LinearPattern:
        """The pattern for the linear-time engine (linear_regex.py)."""
        return compile_linear(self.regex)


def parse_pattern(text: str) -> MetricPattern:
    """``"loss=REGEX"`` -> MetricPattern, or SpecError naming what is wrong and what is allowed."""
    if not isinstance(text, str):
        raise SpecError("metrics", f"expected KEY=REGEX text, got {type(text).__name__}")
    key, found, regex = text.partition("=")
    key = key.strip()
    if not found or not key:
        raise SpecError("metrics", f"{text[:60]!r}: write KEY=REGEX, e.g. loss=loss (\\S+)")
    return check_pattern(key, regex)


def check_pattern(key: str, regex: str) -> MetricPattern:
    """Validate one custom pattern (key name, regex size, compiles, captures a value)."""
    if not _KEY_RE.fullmatch(key):
        raise SpecError("metrics", f"{key[:60]!r} is not a metric name (letters, digits, _ . / -; "
                        "at most 64, starting with a letter)")
    if not regex or len(regex) > MAX_PATTERN_LEN:
        raise SpecError("metrics", f"{key}: give a regex of 1 to {MAX_PATTERN_LEN} characters")
    try:
        compiled = compile_linear(regex)
    except LinearRegexError as exc:
        raise SpecError("metrics", f"{key}: not a valid regex ({exc})") from None
    if compiled.groups < 1:
        raise SpecError("metrics", f"{key}: the regex needs a group around the number, "
                        "e.g. loss=loss (\\S+)")
    return MetricPattern(key, regex)


def parse_patterns(value: Any) -> tuple[tuple[str, str], ...]:
    """``--metrics`` values (a list of KEY=REGEX, or a profile's mapping) -> checked pairs."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    items: list[MetricPattern] = []
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(v, str):
                raise SpecError("metrics", f"{str(k)[:60]}: the regex must be text")
            items.append(check_pattern(str(k), v))
    elif isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, (list, tuple)) and len(item) == 2:
                items.append(check_pattern(str(item[0]), str(item[1])))
            else:
                items.append(parse_pattern(item))
    else:
        raise SpecError("metrics", f"expected KEY=REGEX entries, got {type(value).__name__}")
    if len(items) > MAX_PATTERNS:
        raise SpecError("metrics", f"at most {MAX_PATTERNS} patterns, got {len(items)}")
    return tuple((p.key, p.regex) for p in items)


class MetricParser:
    """Reads metric values from one line of text (a rank's line, its prefix removed)."""

    def __init__(self, patterns: Sequence[tuple[str, str]] = (), *, defaults: bool = True) -> None:
        # Custom patterns (any file's, the magic line's) run in RE2: linear in the line's length.
        self.custom = [(k, compile_linear(r)) for k, r in patterns]
        self.custom_keys = {k for k, _ in patterns}
        self.defaults = defaults

    def parse(self, text: str) -> dict[str, float]:
        """Every metric on the line, key -> value (the last occurrence wins). Never raises."""
        text = text[:_MAX_LINE]
        out: dict[str, float] = {}
        if self.defaults:
            if "=" in text or ":" in text:
                self._pairs(text, out)
            if " rate" in text or " norm" in text or "lm loss" in text:
                for m in _TWO_WORD_RE.finditer(text):
                    self._put(out, _TWO_WORD_KEYS[m.group("key")], m.group("val"))
            if "/s" in text:
                for m in _RATE_RE.finditer(text):
                    key = "tokens/s" if m.group("key") == "tok/s" else m.group("key")
                    if key not in out:
                        self._put(out, key, m.group("val"))
            lowered = text.lstrip()[:9].lower()
            if lowered.startswith(("step", "epoch", "iter", "loss", "lr")) or " loss " in text:
                for m in _SPACE_RE.finditer(text):
                    key = canonical_key(m.group("key"))
                    if key is not None and key not in out:
                        self._put(out, key, m.group("val"))
            if "reached" in text or "New best score" in text:
                for m in _LIGHTNING_RE.finditer(text):
                    raw = m.group("key") or m.group("key2")
                    key = canonical_key(raw) or raw
                    self._put(out, key, m.group("val") or m.group("val2"))
            if "│" in text or "|" in text or "┃" in text:
                t = _TABLE_RE.match(text)
                if t:
                    key = canonical_key(t.group("key"))
                    if key is not None:
                        self._put(out, key, t.group("val"))
        for key, rx in self.custom:
            found = rx.search(text)
            if found is None:
                continue
            try:
                raw = found.group("value") if "value" in rx.groupindex else found.group(1)
            except IndexError:
                continue
            if raw is not None:
                self._put(out, key, raw)
        return out

    def _pairs(self, text: str, out: dict[str, float]) -> None:
        for m in _PAIR_RE.finditer(text):
            key = canonical_key(m.group("key"))
            if key is None or key in self.custom_keys:
                continue
            val = m.group("val")
            self._put(out, key, val)

    @staticmethod
    def _put(out: dict[str, float], key: str, raw: str) -> None:
        value = _number(raw)
        if value is not None:
            out[key] = value


@dataclass
class Series:
    """One metric's points, fewer than ``max_points``.

    Readings are gathered in buckets of ``stride`` readings, each stored as one point at the
    mean x and mean y of its readings (a NaN or inf in a bucket is kept: divergence is news).
    When the series is full, neighbouring points are merged the same way and the stride
    doubles, so every point holds about as many readings as the others.
    """

    max_points: int = DEFAULT_MAX_POINTS
    xs: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)
    stride: int = 1
    last: float = math.nan
    last_x: float = math.nan
    count: int = 0  # readings seen
    _pending: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0], repr=False)
    _bad: float | None = field(default=None, repr=False)  # a non-finite y in the pending bucket

    def add(self, x: float, y: float) -> None:
        self.last, self.last_x = y, x
        self.count += 1
        if self.stride == 1 and self.xs and self.xs[-1] == x:  # another reading at this step
            self._merge_into_last(y)
            return
        p = self._pending
        p[0] += x
        p[2] += 1
        if math.isfinite(y):
            p[1] += y
        else:
            self._bad = y
        if p[2] >= self.stride:
            x_mean, y_mean, w = self._pending_point()
            self.xs.append(x_mean)
            self.ys.append(y_mean)
            self.weights.append(w)
            self._pending, self._bad = [0.0, 0.0, 0.0], None
            if len(self.xs) >= self.max_points:
                self._halve()

    def _merge_into_last(self, y: float) -> None:
        w, prev = self.weights[-1], self.ys[-1]
        self.ys[-1] = (prev * w + y) / (w + 1) if math.isfinite(prev) and math.isfinite(y) else (
            y if not math.isfinite(y) else prev)
        self.weights[-1] = w + 1

    def _pending_point(self) -> tuple[float, float, int]:
        p = self._pending
        w = int(p[2])
        finite = w - (1 if self._bad is not None else 0)
        y = self._bad if self._bad is not None else p[1] / max(finite, 1)
        return p[0] / w, y, w

    def _halve(self) -> None:
        xs, ys, ws = [], [], []
        n = len(self.xs)
        for i in range(0, n - 1, 2):
            w0, w1 = self.weights[i], self.weights[i + 1]
            y0, y1 = self.ys[i], self.ys[i + 1]
            if math.isfinite(y0) and math.isfinite(y1):
                y = (y0 * w0 + y1 * w1) / (w0 + w1)
            else:
                y = y1 if not math.isfinite(y1) else y0
            xs.append((self.xs[i] * w0 + self.xs[i + 1] * w1) / (w0 + w1))
            ys.append(y)
            ws.append(w0 + w1)
        if n % 2:
            xs.append(self.xs[-1])
            ys.append(self.ys[-1])
            ws.append(self.weights[-1])
        self.xs, self.ys, self.weights = xs, ys, ws
        self.stride *= 2

    def points(self) -> list[tuple[float, float]]:
        """(x, y) of every point, the readings of an unfinished bucket as a last point."""
        pts = list(zip(self.xs, self.ys, strict=True))
        if self._pending[2]:
            x, y, _ = self._pending_point()
            pts.append((x, y))
        return pts

    @property
    def readings(self) -> int:
        """Readings held in the points (all of them: merging never drops one)."""
        return sum(self.weights) + int(self._pending[2])


def first_error_line(text: str) -> str | None:
    """The error part of a line (``RuntimeError: CUDA error: out of memory``) if it is one."""
    if not any(hint in text for hint in _EXC_HINTS):
        return None
    t = text.strip()
    if _EXC_RE.match(t):
        return t[:_ERROR_LEN]
    return None


class MetricsTracker:
    """Feeds on a job's log lines: metric series of one rank, and the first error line.

    ``x`` of a point is the last ``step`` seen on that rank (so curves share an axis), or the
    count of that key's values while no step was seen.
    """

    def __init__(self, patterns: Sequence[tuple[str, str]] = (), *, rank: int | None = 0,
                 max_points: int = DEFAULT_MAX_POINTS, defaults: bool = True) -> None:
        self.parser = MetricParser(patterns, defaults=defaults)
        self.rank = rank
        self.max_points = max(4, int(max_points))
        self.series: dict[str, Series] = {}
        self.order: list[str] = []  # keys in the order first seen
        self.step: float | None = None
        self.first_error: str | None = None
        self._other_error: str | None = None
        self._deferred: list[str] = []  # the chosen rank's lines kept by feed_sampled(defer=True)
        self.custom_keys = [k for k, _ in patterns]

    def feed(self, lines: Iterable[LogLine]) -> None:
        """Read a batch of lines (any rank; only ``rank``'s metrics are kept)."""
        for line in lines:
            self.feed_line(line.text, line.rank)

    def feed_text(self, text: str) -> None:
        """Read raw merged-log text (``"R: "`` prefixes kept)."""
        for raw in text.splitlines():
            rank, body = split_log_line(raw)
            self.feed_line(body, rank)

    def feed_sampled(self, text: str, budget: int = 200, *, defer: bool = False) -> None:
        """Read a block of raw merged-log text at a bounded cost: every line is checked for an
        error (cheap), but only the last ``budget`` lines of the chosen rank are parsed for
        metrics. For a live view fed batches of a fast log; the series stays a sample of the
        curve and the last values stay exact.

        ``defer``: only keep those lines (appended to what earlier deferred blocks kept, the last
        ``budget`` of them), to be parsed before the next block fed without ``defer``, or by
        :meth:`flush_deferred`, so a view fed many blocks a second parses a few times a second
        and a slow log, whose lines all fit the budget, loses no point."""
        if self.rank is None:
            mine = [split_log_line(raw)[1] for raw in text.splitlines()]
            for body in mine:
                self._check_error(body)
        else:
            self._check_errors(text)
            mine = self._last_lines(text, budget)
        if defer:
            if mine:
                self._deferred = (self._deferred + mine)[-budget:]
            return
        self.flush_deferred()
        for body in mine[-budget:]:
            self._parse_into(body)

    def flush_deferred(self) -> None:
        """Parse the lines a ``defer`` feed kept, if any."""
        deferred, self._deferred = self._deferred, []
        for body in deferred:
            self._parse_into(body)

    def _needles(self) -> tuple[str, ...]:
        """Substrings one of which every line that could change the error state contains."""
        if self.first_error is not None:
            return _RESTART_NEEDLES
        if self._other_error is not None:
            return _EXC_NEEDLES
        return _ALL_NEEDLES

    def _check_errors(self, text: str) -> None:
        """``_check_error`` on every line of ``text`` (``str.splitlines``) that could change the
        error state, in order: lines holding none of ``_needles()`` are skipped unsplit, so a
        batch without one costs a few C-speed substring searches, not a loop over its lines."""
        found: dict[str, int] = {}  # needle -> its next position at or after pos, -1: none left
        pos, size = 0, len(text)
        while True:
            hit = -1
            for needle in self._needles():  # re-read: a restart marker widens the set
                at = found.get(needle, -2)
                if -1 != at < pos:
                    at = found[needle] = _find(text, needle, pos)
                if at >= 0 and (hit < 0 or at < hit):
                    hit = at
            if hit < 0:
                return
            # The "\n"-delimited stretch around the hit: one line, or several when other line
            # breaks splitlines knows (\r, \x0b, \u2028...) are in it.
            start = text.rfind("\n", 0, hit) + 1
            end = text.find("\n", hit)
            end = size if end < 0 else end
            for raw in text[start:end].splitlines():
                self._check_error(split_log_line(raw)[1])
            pos = end + 1

    def _last_lines(self, text: str, budget: int) -> list[str]:
        """The last ``budget`` lines of ``rank`` in ``text`` (texts without the prefix), in order,
        read back from the end only as far as needed."""
        prefixes = (f"{self.rank}:", "0")  # how every line split_log_line gives this rank starts
        mine: list[str] = []
        end, width = len(text), 64 * budget
        while end > 0 and len(mine) < budget:
            # Split stretches that begin just after a "\n" (or at 0): their lines are exactly
            # the text's own (str.splitlines), and only the tail a batch needs is split.
            start = text.rfind("\n", 0, max(0, end - width)) + 1
            for raw in reversed(text[start:end].splitlines()):
                if raw.startswith(prefixes):
                    rank, body = split_log_line(raw)
                    if rank == self.rank:
                        mine.append(body)
                        if len(mine) >= budget:
                            break
            end, width = start, width * 2
        mine.reverse()
        return mine

    def feed_line(self, text: str, rank: int | None) -> None:
        self._check_error(text)
        if rank != self.rank and self.rank is not None:
            return
        self._parse_into(text)

    def _check_error(self, text: str) -> None:
        if text.startswith("— restart ") and marker_restart(text) is not None:
            # A requeued job's next run begins: the errors of the run before are not its cause.
            self.first_error = self._other_error = None
            return
        if self.first_error is None:
            err = first_error_line(text)
            if err is not None:
                self.first_error = err
            elif (self._other_error is None and any(hint in text for hint in _ERROR_HINTS)
                  and _OTHER_ERROR_RE.search(text[:_MAX_LINE])
                  and not _NOT_A_CAUSE_RE.search(text[:_MAX_LINE])):
                self._other_error = text.strip()[:_ERROR_LEN]

    def _parse_into(self, text: str) -> None:
        # A progress bar rewrites itself with \r: each piece is one reading.
        for piece in text.split("\r") if "\r" in text else (text,):
            found = self.parser.parse(piece)
            if found:
                self._record(found)

    def _record(self, found: dict[str, float]) -> None:
        if "step" in found and math.isfinite(found["step"]):
            self.step = found["step"]
        for key, value in found.items():
            s = self.series.get(key)
            if s is None:
                if len(self.series) >= MAX_KEYS:
                    continue
                s = self.series[key] = Series(self.max_points)
                self.order.append(key)
            if key == "step":
                x = value  # the axis itself
            else:
                x = self.step if self.step is not None else float(s.count + 1)
            s.add(x, value)

    @property
    def error(self) -> str | None:
        """The first exception line, else the first other error report, else None."""
        return self.first_error or self._other_error

    def last_values(self) -> dict[str, float]:
        """Every key's last value, in the order keys were first seen."""
        return {k: self.series[k].last for k in self.order}

    def main_key(self) -> str | None:
        """The metric the summary line names: the first custom key seen, else loss-like keys."""
        for key in self.custom_keys:
            if key in self.series:
                return key
        for key in MAIN_PREFERENCE:
            if key in self.series:
                return key
        for key in self.order:
            if "loss" in key:
                return key
        return next((k for k in self.order if k not in ("step", "epoch")), None)

    def main(self) -> tuple[str, float] | None:
        key = self.main_key()
        return (key, self.series[key].last) if key is not None else None

    def to_lists(self) -> dict[str, list[tuple[float, float]]]:
        """key -> [(x, value), ...] (merged points where the series was downsampled)."""
        return {k: self.series[k].points() for k in self.order}

    def chart_data(self) -> dict[str, list[list[float | None]]]:
        """The series for a JSON front end: [[x, y], ...], non-finite values as None."""
        return {k: [[x, y if math.isfinite(y) else None] for x, y in pts]
                for k, pts in self.to_lists().items()}


def format_value(value: float) -> str:
    """A metric value in a few significant digits (``0.01234``, ``3e-04``, ``1234``, ``nan``)."""
    if not math.isfinite(value):
        return str(value)
    if value == int(value) and abs(value) < 1e9:
        return str(int(value))
    if 1e-3 <= abs(value) < 1e6:
        return f"{value:.4g}"
    return f"{value:.3g}"


def format_last_values(values: Mapping[str, float]) -> str:
    """``loss 0.1234, lr 3e-04, step 100`` (empty when there is nothing)."""
    return ", ".join(f"{k} {format_value(v)}" for k, v in values.items())


def to_frame(series: Mapping[str, list[tuple[float, float]]]) -> Any:
    """A pandas DataFrame (one column per metric, indexed by ``step`` when the log has steps,
    else by ``n``, the reading's number) when pandas is installed; otherwise the plain
    ``{key: [(x, value), ...]}`` mapping itself."""
    import importlib

    try:
        # Optional (not a dependency): imported by name so nothing requires it.
        pd: Any = importlib.import_module("pandas")
    except ImportError:
        return dict(series)
    columns = {}
    for key, pts in series.items():
        if key == "step":  # it is the index
            continue
        xs = [x for x, _ in pts]
        s = pd.Series([y for _, y in pts], index=xs, dtype="float64")
        columns[key] = s[~s.index.duplicated(keep="last")]
    frame = pd.DataFrame(columns)
    frame.index.name = "step" if "step" in series else "n"
    return frame
