"""batch.endreason: why a job ended, one line with the fix, for each way the issue lists (realistic
log text per case), the facts read from a status, and a seeded fuzz test."""

from __future__ import annotations

import random
import string
from dataclasses import replace

import pytest

from jupyter_tiers.app.viewstate.job import end_tail
from jupyter_tiers.batch.endreason import (
    EndFacts,
    EndReason,
    LogTail,
    facts_of,
    format_size,
    module_names,
    parse_mem,
    parse_size,
    why_ended,
)
from jupyter_tiers.batch.status import summary_line
from jupyter_tiers.core.model import JobState, JobStatus, RankPhase, RankState

FAILED = JobState.FAILED

# torch 2.4+ wording, then the torch 1.x/2.0 wording.
CUDA_OOM_NEW = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
    "capacity of 79.15 GiB of which 6.75 MiB is free. Including non-PyTorch memory, this process "
    "has 79.14 GiB memory in use. Of the allocated memory 78.47 GiB is allocated by PyTorch, and "
    "120.33 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large "
    "try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")
CUDA_OOM_OLD = ("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total "
                "capacity; 13.12 GiB already allocated; 1.01 GiB free; 13.50 GiB reserved in total "
                "by PyTorch)")
SLURM_OOM = ("slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of the step tasks "
             "have been OOM Killed.")
NCCL_WATCHDOG = (
    "[rank3]:[E1205 10:14:03.512371 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=1207, OpType=ALLREDUCE, NumelIn=25690112, NumelOut=25690112, "
    "Timeout(ms)=600000) ran for 600035 milliseconds before timing out.")
GLOO_TIMEOUT = ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out "
                "waiting 1800000ms for recv operation to complete")
TERMINATE = "terminate called without an active exception"
ADDR_IN_USE = (
    "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
    "address. port: 29517, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use")


def _reason(lines: list[str], facts: EndFacts) -> EndReason:
    found = why_ended(lines, facts)
    assert found is not None, lines
    assert found.line == f"why: {found.why} — fix: {found.fix}" and "\n" not in found.line
    return found


def test_cuda_oom_names_the_rank_and_its_memory() -> None:
    facts = EndFacts(FAILED, 1, failed_rank=3, failed_node="node2")
    found = _reason(["step 10 loss 2.1", "Traceback (most recent call last):", CUDA_OOM_NEW], facts)
    assert found.why == ("rank 3 (node2) ran out of GPU memory (79.14 GiB in use of 79.15 GiB; "
                         "20.00 MiB more asked)")
    assert "batch size" in found.fix
    old = _reason([CUDA_OOM_OLD], EndFacts(FAILED, 1, failed_rank=0))
    assert "13.12 GiB in use of 15.78 GiB; 2.00 GiB more asked" in old.why


def test_slurm_oom_kill_gives_maxrss_against_mem_and_a_larger_mem() -> None:
    facts = EndFacts(JobState.OUT_OF_MEMORY, 0, max_rss=int(15.8 * (1 << 30)), mem=parse_mem("16G"))
    found = _reason(["epoch 1 loss 0.3", SLURM_OOM], facts)
    assert "MaxRSS 15.8G of --mem 16G" in found.why and found.fix.startswith("ask for --mem 32G")
    # The state alone, and the log line alone, are each enough.
    assert why_ended([], EndFacts(JobState.OUT_OF_MEMORY)) is not None
    only_log = _reason([SLURM_OOM], EndFacts(FAILED, 137, mem=parse_mem("512M")))
    assert "(--mem 512M)" in only_log.why and only_log.fix.startswith("ask for --mem 1G")


def test_nccl_watchdog_names_the_rank_that_stopped_answering() -> None:
    found = _reason([NCCL_WATCHDOG], EndFacts(FAILED, 6, failed_rank=3, silent_ranks=(93,)))
    assert "NCCL watchdog" in found.why and "rank 93 stopped answering" in found.why
    assert "rank 93's last lines" in found.fix
    anon = _reason([NCCL_WATCHDOG], EndFacts(FAILED, 6, failed_rank=3))
    assert "a peer stopped answering" in anon.why and "timeout=" in anon.fix


def test_gloo_timeout_and_a_rank_named_in_the_line() -> None:
    found = _reason([GLOO_TIMEOUT], EndFacts(FAILED, 1, failed_rank=0, silent_ranks=(1,)))
    assert "gloo collective timed out" in found.why and "rank 1 stopped answering" in found.why
    named = _reason(["[E ProcessGroupGloo.cpp:138] Rank 7 failed to pass monitoredBarrier in 30000 ms"],
                    EndFacts(FAILED, 1, failed_rank=0))
    assert "rank 7 stopped answering" in named.why


def test_terminate_called_after_all_work_done_suggests_destroy_process_group() -> None:
    lines = ["done: rank 0 all_reduce 6.0", TERMINATE]
    found = _reason(lines, EndFacts(FAILED, 134, failed_rank=0, all_work_done=True))
    assert "after every rank had finished its work" in found.why
    assert found.fix == "call dist.destroy_process_group() at the end of the script"
    # Not when the rank crashed first, nor when some rank did not finish its work.
    crashed = ["Traceback (most recent call last):", "ValueError: x", TERMINATE]
    # (the crash's own line is the reason then: issue 42)
    own = EndReason("ValueError: x", "")
    assert why_ended(crashed, EndFacts(FAILED, 134, all_work_done=True)) == own
    assert why_ended(lines, EndFacts(FAILED, 134, all_work_done=False)) is None


def test_module_beside_the_notebook_suggests_sync() -> None:
    lines = ["Traceback (most recent call last):", '  File "/scratch/job/train.py", line 3, in <module>',
             "    from mylib.data import loader", "ModuleNotFoundError: No module named 'mylib'"]
    found = _reason(lines, EndFacts(FAILED, 1, failed_rank=0, beside_notebook=frozenset({"mylib"})))
    assert "mylib sits beside the notebook" in found.why and found.fix.startswith("run with --sync .")
    synced = _reason(lines, EndFacts(FAILED, 1, beside_notebook=frozenset({"mylib"}), synced=True))
    assert "add mylib's folder to --sync" in synced.fix
    other = _reason(lines, EndFacts(FAILED, 1))
    assert "install it" in other.fix


def test_address_in_use_names_the_port() -> None:
    found = _reason([ADDR_IN_USE], EndFacts(FAILED, 1, failed_rank=0, failed_node="node1"))
    assert "rendezvous port 29517 was already in use on node1" in found.why
    assert "--rdzv-port" in found.fix
    plain = _reason(["OSError: [Errno 98] Address already in use"], EndFacts(FAILED, 1, rdzv_port=29999))
    assert "port 29999" in plain.why


def test_timeout_with_last_step_against_planned() -> None:
    found = _reason(["step 40/100 loss 1.2"], EndFacts(JobState.TIMEOUT, time_limit="00:10:00"))
    assert "(00:10:00) at step 40 of 100 (40 %)" in found.why and "2.5× the time" in found.fix
    tqdm = _reason(["train:  37%|███▋      | 370/1000 [01:02<01:45, 6.0it/s]"], EndFacts(JobState.TIMEOUT))
    assert "step 370 of 1000" in tqdm.why
    known = _reason([], EndFacts(JobState.TIMEOUT, last_step=7, planned_steps=10))
    assert "step 7 of 10" in known.why
    unknown = _reason(["hello", "slurmstepd: error: *** JOB 12 ON node1 CANCELLED AT 2026-12-05T10:00:00 "
                       "DUE TO TIME LIMIT ***"], EndFacts(JobState.TIMEOUT, last_step=3))
    assert "at step 3" in unknown.why and "more --time" in unknown.fix


def test_nothing_known_completed_or_running_give_none() -> None:
    assert why_ended(["ValueError: bad"], EndFacts(FAILED, 1)) is None
    assert why_ended([CUDA_OOM_NEW], EndFacts(JobState.COMPLETED, 0)) is None
    assert why_ended([CUDA_OOM_NEW], EndFacts(JobState.RUNNING)) is None
    for known in (JobState.CANCELLED, JobState.PREEMPTED):  # the cause is known: not the lines
        assert why_ended([CUDA_OOM_NEW], EndFacts(known)) is None


def _status(*ranks: RankState, state: JobState = FAILED) -> JobStatus:
    return JobStatus("7", state, exit_code=134, ranks=ranks, world_size=len(ranks))


def test_facts_of_a_status() -> None:
    status = _status(RankState(0, RankPhase.FAILED, "node1", exit_code=134, ended_at=5.0),
                     RankState(1, RankPhase.EXITED, "node1", exit_code=0, ended_at=4.0))
    facts = facts_of(status, {"mem": "4000", "time": "00:05:00", "sync": ["."], "rdzv_port": 29555})
    assert facts.failed_rank == 0 and facts.failed_node == "node1" and facts.all_work_done
    assert facts.silent_ranks == (1,) and facts.mem == 4000 << 20 and facts.time_limit == "00:05:00"
    assert facts.synced and facts.rdzv_port == 29555
    crashed = replace(status, ranks=(status.ranks[0], RankState(1, RankPhase.FAILED, "node1", exit_code=1,
                                                                ended_at=6.0)))
    assert not facts_of(crashed).all_work_done
    # Of two ranks, the one that did not fail is the suspect when none ended before.
    pair = _status(RankState(0, RankPhase.FAILED, "node1", exit_code=1, ended_at=5.0),
                   RankState(1, RankPhase.STOPPED, "node1", ended_at=6.0))
    assert facts_of(pair).silent_ranks == (1,)
    three = replace(pair, ranks=(*pair.ranks, RankState(2, RankPhase.STOPPED, "node1", ended_at=6.0)))
    assert facts_of(three).silent_ranks == ()
    # Bad spec values are unknowns, not errors.
    odd = facts_of(status, {"mem": True, "time": ["x"], "rdzv_port": "29500"})
    assert odd.mem is None and odd.time_limit is None and odd.rdzv_port is None


def test_summary_line_shows_why_in_place_of_the_error() -> None:
    status = _status(RankState(0, RankPhase.FAILED, "node1", exit_code=134, ended_at=5.0))
    reason = why_ended([TERMINATE], facts_of(status))
    assert reason is not None
    line = summary_line(status, error="RuntimeError: x", why=reason.line)
    assert line.endswith(" — " + reason.line) and "RuntimeError" not in line
    assert summary_line(status, error="RuntimeError: x").endswith("— RuntimeError: x")


def test_log_tail_and_the_views_end_tail() -> None:
    tail = LogTail(keep=3)
    tail.feed_text("".join(f"0: line {i}\n1: other {i}\n" for i in range(10)) + "slurmstepd: error: x\n")
    assert tail.lines_of(0) == ["line 7", "line 8", "line 9", "slurmstepd: error: x"]
    assert tail.lines_of(None) == tail.lines_of(0) and tail.has(1) and not tail.has(5)
    status = _status(RankState(0, RankPhase.EXITED),
                     RankState(5, RankPhase.FAILED, exit_code=1, ended_at=1.0))
    assert end_tail("0: a\n", status) is None  # the failing rank's lines are not in the view's text
    got = end_tail("5: ModuleNotFoundError: No module named 'x'\n", status)
    assert got is not None and got.lines_of(5)[0].startswith("ModuleNotFoundError")


def test_module_names_of_a_folder() -> None:
    entries = [("mylib", True), ("train.py", False), ("notes.txt", False), ("my-data", True),
               ("2x.py", False), (".ipynb_checkpoints", True)]
    assert module_names(entries) == frozenset({"mylib", "train"})


@pytest.mark.parametrize("text,want", [("79.14 GiB", int(79.14 * (1 << 30))), ("20 MiB", 20 << 20),
                                       ("512 KB", 512 << 10), ("x", None), ("", None)])
def test_parse_size(text: str, want: int | None) -> None:
    assert parse_size(text) == want


def test_sizes_and_mem() -> None:
    assert parse_mem("16G") == 16 << 30 and parse_mem(4000) == 4000 << 20 and parse_mem("lots") is None
    assert parse_mem(None) is None and parse_mem(True) is None
    assert format_size(512) == "512B" and format_size(1536 << 20) == "1.5G" and format_size(5 << 40) == "5T"


def test_fuzz_never_raises_and_gives_one_line() -> None:
    rng = random.Random(20261205)
    pieces = [CUDA_OOM_NEW, CUDA_OOM_OLD, SLURM_OOM, ADDR_IN_USE, "Address already in use port: 99999",
              "ModuleNotFoundError: No module named 'a.b'", NCCL_WATCHDOG, GLOO_TIMEOUT, TERMINATE,
              "step 3/0", "step 99999999999999/1", "Traceback (most recent call last):", "from rank 1234567",
              "Tried to allocate 1e9 GiB", "9999999999999999 GiB already allocated", "\x00\u2028", " 0/0 ["]
    states = list(JobState)
    alphabet = string.printable + "é█\u2028"
    for _ in range(3000):
        lines = []
        for _ in range(rng.randrange(0, 6)):
            base = rng.choice(pieces)
            cut = rng.randrange(len(base) + 1)
            noise = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
            lines.append(rng.choice([base, base[:cut] + noise + base[cut:], noise, base * 50]))
        facts = EndFacts(
            rng.choice(states), rng.choice([None, 0, 1, 134, 255]),
            failed_rank=rng.choice([None, 0, 5]), failed_node=rng.choice([None, "n1", "x" * 500]),
            all_work_done=rng.random() < 0.5, silent_ranks=tuple(rng.sample(range(9), rng.randrange(4))),
            max_rss=rng.choice([None, 0, 1 << 30, 1 << 60]), mem=rng.choice([None, 0, 1 << 20]),
            last_step=rng.choice([None, 0.0, 5.0, 1e300]), planned_steps=rng.choice([None, 0, 10]),
            time_limit=rng.choice([None, "1-00:00:00", "y" * 300]),
            beside_notebook=frozenset(rng.sample(["a", "b"], rng.randrange(3))), synced=rng.random() < 0.5)
        out = why_ended(lines, facts)
        if out is not None:
            # Every known cause has its fix; a crash's own line (issue 42) has none to give.
            assert out.why and (out.fix or out.line == out.why), out
            assert "\n" not in out.line and len(out.line) < 1200, out
        known = facts.state in (JobState.COMPLETED, JobState.CANCELLED, JobState.PREEMPTED)
        if known or not facts.state.terminal:
            assert out is None
        tail = LogTail(keep=4)
        tail.feed_text("\n".join(f"{rng.randrange(-2, 9)}: {line}" if rng.random() < 0.7 else line
                                 for line in lines))
        assert len(tail.lines_of(rng.choice([None, 0, 3]))) <= 8


def test_a_memory_kill_asks_accounting_for_maxrss_once() -> None:
    """engine.handles.end_reason_of: the job's MaxRSS comes from the tier's accounting only for a
    memory kill, and a tier without accounting leaves it out (never an error)."""
    from types import SimpleNamespace

    from jupyter_tiers.core.errors import Unsupported
    from jupyter_tiers.engine.handles import end_reason_of

    asked: list[dict[str, object]] = []

    def history(**query: object) -> list[object]:
        asked.append(query)
        return [SimpleNamespace(max_rss=None), SimpleNamespace(max_rss=int(15.8 * (1 << 30)))]

    record = SimpleNamespace(job_id="4242", spec={"mem": "16G"})
    job = SimpleNamespace(record=record, tier=SimpleNamespace(history=history))
    tail = LogTail()
    tail.feed_text(f"0: epoch 1\n{SLURM_OOM}\n")
    status = JobStatus("4242", JobState.OUT_OF_MEMORY, ranks=(RankState(0, RankPhase.STOPPED, "node1"),),
                       world_size=1)
    found = end_reason_of(job, status, tail, None)  # type: ignore[arg-type]  # a duck-typed Job
    assert found is not None and "MaxRSS 15.8G of --mem 16G" in found.why and "--mem 32G" in found.fix
    assert asked == [{"job": "4242", "days": 366, "user": "all"}]

    def no_accounting(**_query: object) -> list[object]:
        raise Unsupported("no accounting here")

    job.tier = SimpleNamespace(history=no_accounting)
    plain = end_reason_of(job, status, tail, None)  # type: ignore[arg-type]
    assert plain is not None and "(--mem 16G)" in plain.why
    # Not asked for any other end.
    asked.clear()
    job.tier = SimpleNamespace(history=history)
    timeout = replace(status, state=JobState.TIMEOUT)
    steps = LogTail()
    steps.feed_text("0: step 3/10\n")
    found = end_reason_of(job, timeout, steps, 3.0)  # type: ignore[arg-type]
    assert found is not None and "at step 3 of 10" in found.why and asked == []
