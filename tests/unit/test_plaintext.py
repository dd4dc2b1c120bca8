"""Cluster text printed as text (issue 20 item 15): a pod event, a Slurm pending reason or an
error message holding terminal escapes or C1 controls reaches the text views, the CLI and the
history table through one sanitiser, ``plaintext.printable``."""

from __future__ import annotations

import io
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from jupyter_tiers.batch import history
from jupyter_tiers.core.errors import TiersError
from jupyter_tiers.core.model import JobState, JobStatus, PodInfo, ServiceState
from jupyter_tiers.core.plaintext import printable
from jupyter_tiers.engine.rank_metrics import RankMetrics
from jupyter_tiers.engine.subscription import Subscription
from jupyter_tiers.faces import cli, tiers_command
from jupyter_tiers.faces.widgets.text import TextView
from tests.unit.test_serve_text import make_service, status

# An OSC 52 clipboard write, a screen clear, a CSI via its C1 byte, a bare C1 and a BEL.
NASTY = "a\x1b]52;c;ZWNobyBwd25lZA==\x07b\x1b[2J\x9b31m\x85\x90c\x7f"


def _clean(text: str) -> None:
    for ch in ("\x1b", "\x07", "\x9b", "\x85", "\x90", "\x7f"):
        assert ch not in text, (ch, text)


def test_printable_marks_every_control_and_keeps_what_is_asked() -> None:
    assert printable("plain text é ✓") == "plain text é ✓"
    assert printable(NASTY) == "a?]52;c;ZWNobyBwd25lZA==?b?[2J?31m??c?"
    assert printable("one\ntwo\tx\r", keep="\n\t") == "one\ntwo\tx?"
    rng = random.Random(15)
    for _ in range(2000):
        text = "".join(chr(rng.choice([rng.randrange(0, 0x200), 0x1b, 0x9b, 0x2028, 0x202e]))
                       for _ in range(rng.randint(0, 20)))
        out = printable(text)
        assert len(out) == len(text) and out.isprintable()


def test_service_text_view_prints_pod_events_and_reasons_as_text(tmp_path: Path) -> None:
    pod = PodInfo("llama-svc-7c9f-x2", phase="Pending", reason="FailedMount", message=f"volume {NASTY}")
    script: Any = [status(ServiceState.DEPLOYING, pods=(pod,), api_reachable=False, message=f"down {NASTY}"),
                   status(ServiceState.FAILED, pods=(pod,), reason=f"pod llama-svc-7c9f-x2 {NASTY}")]
    _tier, service = make_service(tmp_path, script)
    out = io.StringIO()
    from jupyter_tiers.faces.widgets.serve_text import ServiceTextView

    ServiceTextView(service, out).run(timeout=10)
    text = out.getvalue()
    _clean(text)
    assert "  pod llama-svc-7c9f-x2: FailedMount: volume a?]52;c;" in text
    assert "! down a?]52;c;ZWNobyBwd25lZA==?b?[2J?31m??c?" in text


class _Watcher:
    def __init__(self, record: Any, statuses: list[JobStatus]) -> None:
        self.record = record
        self.statuses = statuses

    def watch(self, on_status: Any, *, on_lines: Any, on_end: Any, metrics: Any) -> Subscription[JobStatus]:
        sub = Subscription(self.record, on_status)
        for st in self.statuses:
            sub.deliver(st)
        on_end(self.statuses[-1])
        sub.end(self.statuses[-1])
        return sub


def test_job_text_view_prints_a_slurm_reason_as_text() -> None:
    record = SimpleNamespace(job_id="41", name="train", profile="hpc", world_size=2, spec={}, jobdir="")
    statuses = [JobStatus("41", JobState.PENDING, reason=f"Resources{NASTY}"),
                JobStatus("41", JobState.CANCELLED, message=f"gone {NASTY}")]
    job = SimpleNamespace(record=record, watch=_Watcher(record, statuses).watch, metric_patterns=lambda: (),
                          live_metrics=lambda: RankMetrics(()),
                          end_reason=lambda *_a, **_k: None)
    out = io.StringIO()
    TextView(job, out).run(timeout=10)  # type: ignore[arg-type]  # a duck-typed Job
    _clean(out.getvalue())
    assert "[PENDING (Resourcesa?]52;c;" in out.getvalue()


def test_cli_prints_errors_and_profile_trouble_as_text(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    def boom(argv: list[str]) -> None:
        raise TiersError(f"sbatch: error: {NASTY}\nsecond line")

    monkeypatch.setattr(tiers_command, "run", boom)
    assert cli.main(["jobs"]) == 1
    err = capsys.readouterr().err
    _clean(err)
    assert "sbatch: error: a?]52;c;" in err and "\nsecond line" in err

    from jupyter_tiers.app import actions

    monkeypatch.undo()  # the real command again, over a listing with a profile's trouble
    listing = actions.Listing(errors=[actions.ProfileError("hpc", f"slurmctld: {NASTY}")])
    monkeypatch.setattr(actions, "list_items", lambda **kw: listing)
    tiers_command.run(["jobs"])
    out = capsys.readouterr().out
    _clean(out)
    assert "(hpc: states as last recorded — slurmctld: a?]52;c;" in out


def test_the_history_table_uses_the_same_sanitiser() -> None:
    assert history._cell(NASTY, width=100) == printable(NASTY)


def test_the_jobs_table_shows_recorded_cluster_text_as_text() -> None:
    from jupyter_tiers.config.registry import JobRecord

    rec = JobRecord(profile="hpc", tier="slurm", job_id="41", name="train", kind="job", world_size=2,
                    state="RUNNING", nodelist=f"node[1-2]{NASTY}", submitted_at=0.0)
    table = tiers_command.format_jobs([rec], now=10.0)
    _clean(table)
    assert "node[1-2]a?]52;c;" in table


def test_colour_sequences_are_stripped_from_log_views() -> None:
    """Issue 41 item 18: vLLM's own log read ``[0;36m(APIServer pid=...)[0;0m [32mINFO`` in the
    service view; a job's coloured log the same."""
    from jupyter_tiers.app.viewstate.job import text_message
    from jupyter_tiers.app.viewstate.serve import line_rows
    from jupyter_tiers.core.model import PodLogLine
    from jupyter_tiers.core.plaintext import strip_ansi

    vllm = "\x1b[0;36m(APIServer pid=41)\x1b[0;0m \x1b[32mINFO\x1b[0m 12-07 10:00:01 Started server"
    assert strip_ansi(vllm) == "(APIServer pid=41) INFO 12-07 10:00:01 Started server"
    (row,) = line_rows([PodLogLine(vllm, "vllm-0")])
    assert row[1] == "(APIServer pid=41) INFO 12-07 10:00:01 Started server"
    assert text_message("[rank 0] \x1b[31mERROR\x1b[0m: boom\n")["text"] == "[rank 0] ERROR: boom\n"
    planted = "\x1b]52;c;ZXZpbA==\x07"  # not a colour: left for printable() and the views
    assert strip_ansi(planted) == planted
    assert strip_ansi("\x1b[" + "1;" * 10_000 + "m") == "\x1b[" + "1;" * 10_000 + "m"  # bounded
