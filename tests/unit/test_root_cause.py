"""Issue 42: a crashed server's (or rank's) summary quotes the line that explains the crash, not
the log's last line: the first error of the last traceback chain, "see root cause above" skipped,
vLLM's interleaved per-process lines read apart, known causes named with their fix.

The logs in tests/unit/data/crash_logs/ were recorded here from real programs, except vLLM's
start-up failure, which is reconstructed from the lines quoted in the facts (its README says how).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from jupyter_tiers.app.viewstate.serve import PodTails, summary_for
from jupyter_tiers.batch.endreason import EndFacts, why_ended
from jupyter_tiers.core.model import JobState, PodInfo, PodLogLine, ServiceState, ServiceStatus
from jupyter_tiers.core.rootcause import RootCause, root_cause, strip_prefixes
from jupyter_tiers.serving.status import crash_words, failed_pod, summary_line

LOGS = Path(__file__).resolve().parent / "data" / "crash_logs"
SHM_LINE = ("RuntimeError: Insufficient space in /dev/shm for shared-memory allocation: 160 MiB required, "
            "64 MiB free. Increase /dev/shm (e.g. --shm-size or --ipc=host).")
LAST_LINE = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
POD = "llm-7c9f-x2"
CRASH = PodInfo(POD, phase="Running", restarts=3, reason="CrashLoopBackOff", exit_code=1)


def _log(name: str) -> list[str]:
    return (LOGS / name).read_text(encoding="utf-8").splitlines()


def _failed(*pods: PodInfo) -> ServiceStatus:
    return ServiceStatus("llm", ServiceState.FAILED, desired=1, pods=pods or (CRASH,),
                         reason=f"pod {POD} CrashLoopBackOff (exit 1, 3 restarts)")


# --- the recorded and reconstructed logs -----------------------------------------------------


@pytest.mark.parametrize(("name", "line", "kind", "detail"), [
    ("vllm_0.32_shm_reconstructed.log", SHM_LINE, "shm", "160 MiB required, 64 MiB free"),
    ("chained_two_processes.log", SHM_LINE, "shm", "160 MiB required, 64 MiB free"),
    ("no_module.log", "ModuleNotFoundError: No module named 'vllm'", "no_module", "vllm"),
    ("addr_in_use.log", "OSError: [Errno 98] Address already in use", "addr_in_use", ""),
    ("sh_no_command.log", "sh: 1: exec: vllm: not found", "no_command", "vllm"),
])
def test_each_log_gives_the_line_that_explains_it(name: str, line: str, kind: str, detail: str) -> None:
    lines = _log(name)
    assert root_cause(lines) == RootCause(line, kind, detail)


def test_a_crash_looping_vllm_pods_summary_names_dev_shm_and_the_option() -> None:
    """Done-when of issue 42: vLLM's start-up failure (its last line says only "See root cause
    above") gives a summary naming /dev/shm and --shm-size."""
    lines = _log("vllm_0.32_shm_reconstructed.log")
    assert strip_prefixes(lines[-1])[1] == LAST_LINE  # what the summary used to quote
    summary = summary_line(_failed(), elapsed_s=95, log_lines=lines)
    assert summary.startswith(
        f"service llm FAILED after 00:01:35: pod {POD} CrashLoopBackOff (exit 1, 3 restarts)")
    assert ("— cause: RuntimeError: Insufficient space in /dev/shm for shared-memory allocation: "
            "160 MiB required") in summary
    assert "— fix: give the pods a larger /dev/shm (160 MiB required, 64 MiB free): --shm-size 1Gi" in summary
    assert "See root cause above" not in summary and "\n" not in summary


def test_the_views_summary_says_the_same_from_the_lines_they_received() -> None:
    """The text view and the widget keep each pod's last lines as they arrive; another pod's
    lines between them change nothing."""
    tails = PodTails()
    for n, line in enumerate(_log("vllm_0.32_shm_reconstructed.log")):
        tails.feed([PodLogLine(line, POD)])
        if n % 7 == 0:
            tails.feed([PodLogLine("INFO: healthy", "llm-7c9f-ok")])
    tails.feed([PodLogLine("— restart 3 —", POD)])
    ok = PodInfo("llm-7c9f-ok", phase="Running", ready=True)
    summary = summary_for(_failed(ok, CRASH), 95, tails=tails)
    assert "cause: " + SHM_LINE[:60] in summary and "--shm-size 1Gi" in summary


def test_interleaving_the_processes_any_way_keeps_the_cause() -> None:
    """vLLM's API server and engine core write one log: however their lines interleave (each
    process's own order kept), the cause is the engine core's."""
    lines = _log("vllm_0.32_shm_reconstructed.log")
    by_process: dict[str, list[str]] = {}
    for line in lines:
        by_process.setdefault(strip_prefixes(line)[0], []).append(line)
    rng = random.Random(4242)
    for _ in range(50):
        queues = [list(q) for q in by_process.values()]
        mixed: list[str] = []
        while any(queues):
            q = rng.choice([q for q in queues if q])
            mixed.append(q.pop(0))
        found = root_cause(mixed)
        assert found is not None and found.line == SHM_LINE and found.kind == "shm"


# --- the rules -------------------------------------------------------------------------------


def test_the_first_error_of_the_last_chain() -> None:
    lines = [
        "Traceback (most recent call last):", '  File "a.py", line 1, in <module>', "KeyError: 'old run'",
        "starting again",
        "Traceback (most recent call last):", '  File "a.py", line 3, in load', "ValueError: bad shape",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):", '  File "a.py", line 9, in main', "RuntimeError: load failed",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):", '  File "a.py", line 12, in main', "SystemExit: 1",
    ]
    assert root_cause(lines) == RootCause("ValueError: bad shape")


def test_errors_that_point_elsewhere_are_skipped() -> None:
    lines = ["Traceback (most recent call last):", "  File x", "OSError: disk on fire",
             "Traceback (most recent call last):", "  File y", "RuntimeError: failed. See root cause above."]
    assert root_cause(lines) == RootCause("OSError: disk on fire")
    only = ["Traceback (most recent call last):", "  File y", "RuntimeError: see the logs above"]
    assert root_cause(only) is None
    assert crash_words(only) == "last line: RuntimeError: see the logs above"


def test_prefixes_and_colours_are_taken_off() -> None:
    line = "\x1b[1;36m(EngineCore_DP0 pid=63)\x1b[0;0m ERROR 12-07 14:02:28 [v1/engine/core.py:708]   File x"
    assert strip_prefixes(line) == ("EngineCore_DP0 pid=63", "  File x")
    assert strip_prefixes("(VllmWorker TP0 pid=7) INFO 12-07 14:02:28.123 [gpu.py:1] up") == (
        "VllmWorker TP0 pid=7", "up")
    assert strip_prefixes("(not a prefix) text") == ("", "(not a prefix) text")


@pytest.mark.parametrize(("line", "kind", "detail"), [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.", "cuda_oom", ""),
    ("RuntimeError: DataLoader worker (pid 7) is killed by signal: Bus error. It is possible that "
     "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
     "shm", ""),
    ("node1:77:90 [0] NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x (size 9637888)",
     "shm", ""),
    ("OSError: [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): "
     "address already in use", "addr_in_use", "8000"),
    ("/jt/code/command.sh: line 1: text-generation-launcher: command not found", "no_command",
     "text-generation-launcher"),
    ("env: 'vllm': No such file or directory", "no_command", "vllm"),
])
def test_known_causes_without_a_traceback(line: str, kind: str, detail: str) -> None:
    found = root_cause(["starting", line, "exiting"])
    assert found is not None and (found.kind, found.detail) == (kind, detail)


def test_no_traceback_and_no_known_cause_quotes_the_last_line() -> None:
    assert root_cause(["about to fail"]) is None
    assert crash_words(["starting", "about to fail", ""]) == "last line: about to fail"
    assert summary_line(_failed(), log_lines=["about to fail"]).endswith(" — last line: about to fail")
    assert summary_line(_failed(), last_log_line="about to fail").endswith(" — last line: about to fail")


@pytest.mark.parametrize(("kind", "detail", "says"), [
    ("cuda_oom", "", "--max-model-len"),
    ("no_module", "vllm", "the image has no Python module 'vllm'"),
    ("addr_in_use", "8000", "port 8000 was taken inside the pod"),
    ("no_command", "vllm", "the image has no command 'vllm'"),
    ("shm", "3 GiB required, 64 MiB free", "--shm-size 6Gi"),
])
def test_each_known_cause_has_its_fix(kind: str, detail: str, says: str) -> None:
    from jupyter_tiers.serving.status import cause_fix

    fix = cause_fix(RootCause("x", kind, detail))
    assert fix is not None and says in fix


def test_the_failed_pod_is_the_one_read() -> None:
    ok = PodInfo("a", phase="Running", ready=True)
    assert failed_pod(_failed(ok, CRASH)) == POD
    assert failed_pod(_failed(ok)) is None
    gone = PodInfo("b", phase="Failed", reason="Evicted")
    assert failed_pod(_failed(ok, gone)) == "b"


def test_lines_are_bounded_and_read_linearly() -> None:
    """Huge and adversarial lines (the patterns have no nested quantifiers) come back at once,
    cut to a line's bound."""
    nasty = ["(" + "a" * 5000, "(" + "a " * 3000 + "pid=1", "ERROR 12-07 10:00:00 [" + "x" * 9000,
             "Traceback (most recent call last):", "  " + "File " * 4000, "E" * 100_000 + ": boom",
             ": not found" * 5000, "/dev/shm " * 5000 + "9" * 5000 + " MiB required"]
    found = root_cause(nasty * 20)
    assert found is not None and len(found.line) <= 300
    assert len(crash_words(nasty)) < 700


def test_a_failed_ranks_reason_is_its_crash_line_on_slurm() -> None:
    """Slurm's why-it-ended: a known /dev/shm cause with its fix there; an unknown crash quoted by
    the line that explains it, not the traceback's last line."""
    shm = why_ended(_log("chained_two_processes.log"), EndFacts(JobState.FAILED, 1, failed_rank=0,
                                                                 failed_node="node1"))
    assert shm is not None
    assert shm.why == "rank 0 (node1): /dev/shm on node1 was too small for its shared memory " \
                      "(160 MiB required, 64 MiB free)"
    assert "num_workers" in shm.fix
    lines = ["Traceback (most recent call last):", "  File t.py", "ValueError: bad shape (3, 4)", "",
             "The above exception was the direct cause of the following exception:", "",
             "Traceback (most recent call last):", "  File t.py",
             "RuntimeError: step failed; see above for details"]
    own = why_ended(lines, EndFacts(JobState.FAILED, 1, failed_rank=2))
    assert own is not None and own.line == "ValueError: bad shape (3, 4)"  # where the first error line was
    assert why_ended(["about to fail"], EndFacts(JobState.FAILED, 1)) is None
    assert why_ended(lines, EndFacts(JobState.COMPLETED, 0)) is None
