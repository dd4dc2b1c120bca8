"""A followed log's metric points, parsed once where the log is read: :class:`RankMetrics`.

The log follower (watch.py's LogFollower) feeds each batch it reads to the RankMetrics it was
given, before the batch reaches its listener, so a view never parses the log itself: the
notebook widget (faces/widgets/job_view.py), the text view (faces/widgets/text.py) and the lab
panel's view stream (app/viewstate/job_stream.py, behind the server's log websocket) read the
same points from it and chart and summarise a log alike.

Rank 0's tracker is always fed: the summary line names its main metric and the log's first
error, whichever rank the charts show. Picking another rank starts a fresh tracker for it that
reads the log from its start up to where the live feed has got (in a background thread, as a
stream: the log is never whole in memory), then takes over the charts with the batches that
arrived meanwhile. Every series stays bounded (``max_points``). A fast log arrives in many
batches a second: they are parsed in full at most ``1 / parse_every`` times a second and only
kept in between (the charts are a sample of the curve; the last values stay exact and every line
is still checked for errors); :meth:`RankMetrics.flush` parses what is kept.
"""

from __future__ import annotations

import codecs
import collections
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..batch.logs import batch_text, split_log_line
from ..batch.metrics import MetricsTracker
from ..core.errors import TiersError
from ..core.model import LogLine

#: Live batches kept while a picked rank's history is read, each only that rank's last
#: PENDING_LINES lines (older ones are dropped: the live series is a sample of the curve anyway,
#: feed_sampled parses no more, and the last values come from the newest batches).
PENDING_BATCHES = 256
PENDING_LINES = 200
#: Seconds between two full parses of a live log's batches (batches in between are kept).
PARSE_EVERY = 0.125


class RankMetrics:
    """Rank 0's metrics (``summary``) and the charted rank's (``chart``), fed with each batch of
    raw merged-log text (``"R: "`` prefixes kept) and the log offset just past it."""

    def __init__(self, patterns: Sequence[tuple[str, str]] = (), *, max_points: int = 200,
                 parse_every: float = PARSE_EVERY, clock: Callable[[], float] = time.monotonic) -> None:
        self._patterns = tuple(patterns)
        self._max_points = max_points
        self._parse_every = parse_every
        self._clock = clock
        self._parsed_at = -float("inf")
        self.summary = MetricsTracker(self._patterns, rank=0, max_points=max_points)
        self.chart = self.summary
        self.rank = 0  # the rank ``chart`` holds
        self.wanted = 0  # the rank last asked for (``rank`` once its history is read)
        self.end = 0  # log offset just past the last batch fed
        self.note = ""  # why the charted rank's history is missing, if it is
        self._lock = threading.Lock()
        self._pending: collections.deque[str] | None = None  # batches during a history read
        self._generation = 0

    def start_at(self, offset: int) -> None:
        """The live feed starts at this log offset (a reattached view skips the log's start)."""
        with self._lock:
            self.end = max(self.end, offset)

    def feed(self, text: str, end: int | None = None, *, defer: bool = False) -> None:
        """One batch of the live log (``end``: the offset just past it). Every line is checked for
        errors; of the rank's lines, the last 200 are parsed for metrics, or with ``defer`` only
        the last 20 kept to be parsed with the next batch fed without it (MetricsTracker
        .feed_sampled). Empty ``text`` without ``defer`` parses what is kept (the log's end)."""
        with self._lock:
            if end is not None:
                self.end = max(self.end, end)
            trackers = [self.summary] if self.chart is self.summary else [self.summary, self.chart]
            if not text:
                if not defer:
                    for tracker in trackers:
                        tracker.flush_deferred()
                return
            for tracker in trackers:
                tracker.feed_sampled(text, 20 if defer else 200, defer=defer)
            if self._pending is not None:
                mine = [raw for raw in text.splitlines() if split_log_line(raw)[0] == self.wanted]
                if mine:
                    self._pending.append("\n".join(mine[-PENDING_LINES:]) + "\n")

    def feed_batch(self, lines: Sequence[LogLine]) -> None:
        """One batch as the log follower read it (a LogBatch, or LogLines): parsed in full when
        ``parse_every`` has passed since the last full parse, else kept for the next one."""
        text, end = batch_text(lines)
        if not text:
            return
        now = self._clock()
        due = now - self._parsed_at >= self._parse_every
        if due:
            self._parsed_at = now
        self.feed(text, end, defer=not due)

    def flush(self) -> None:
        """Parse the lines kept since the last full parse (before a snapshot, at the log's end)."""
        self.feed("")

    def snapshot(self) -> tuple[int, str, dict[str, list[list[float | None]]]]:
        """The charted rank, the note about its history, and its series for the front end."""
        with self._lock:
            return self.rank, self.note, self.chart.chart_data()

    def pick(self, rank: int, read: Callable[[], Iterable[bytes]],
             on_ready: Callable[[], None]) -> threading.Thread | None:
        """Chart ``rank`` from now on. Rank 0 (or the rank already charted) switches at once;
        another rank's history is read by ``read()`` (the merged log's bytes from its start) in a
        thread, which calls ``on_ready`` once the charts hold that rank (and returns it)."""
        with self._lock:
            self._generation += 1
            generation = self._generation
            self.wanted = rank
            if rank == self.rank or rank == 0:
                self.chart = self.summary if rank == 0 else self.chart
                self.rank, self._pending, self.note = rank, None, ""
                ready = True
            else:
                self._pending = collections.deque(maxlen=PENDING_BATCHES)
                upto = self.end
                ready = False
        if ready:
            on_ready()
            return None
        thread = threading.Thread(target=self._load, args=(generation, rank, read, upto, on_ready),
                                  name="jt-rank-metrics", daemon=True)
        thread.start()
        return thread

    def _load(self, generation: int, rank: int, read: Callable[[], Iterable[bytes]], upto: int,
              on_ready: Callable[[], None]) -> None:
        tracker = MetricsTracker(self._patterns, rank=rank, max_points=self._max_points)
        note = ""
        try:
            read_history(tracker, read(), upto)
        except (TiersError, OSError) as exc:
            note = f"rank {rank}'s earlier lines could not be read ({exc})"
        with self._lock:
            if generation != self._generation:
                return  # another rank was picked meanwhile
            for text in self._pending or ():
                tracker.feed_sampled(text)
            self.chart, self.rank, self.note, self._pending = tracker, rank, note, None
        on_ready()


def read_history(tracker: MetricsTracker, chunks: Iterable[bytes], upto: int) -> int:
    """Feed ``tracker`` the log's complete lines among its first ``upto`` bytes, read from
    ``chunks`` as a stream (never whole in memory); returns the bytes read."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    done = 0
    rest = ""
    for chunk in chunks:
        if done >= upto:
            break
        piece: Any = chunk[: upto - done]
        done += len(piece)
        rest += decoder.decode(piece)
        cut = rest.rfind("\n")
        if cut >= 0:
            tracker.feed_text(rest[: cut + 1])
            rest = rest[cut + 1:]
        elif len(rest) > 1 << 20:  # a progress bar that never ends its line
            tracker.feed_text(rest)
            rest = ""
    rest += decoder.decode(b"", final=True)
    if rest:
        tracker.feed_text(rest)
    return done
