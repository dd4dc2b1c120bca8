"""Issue 28 §3 on the real cluster: a job ends in a way the classifier knows, for real, and the
summary line says why with the fix (``why: … — fix: …``), from the failing rank's last lines and
the job's record. The cases that need no GPU: a module beside the notebook that was not synced,
the rendezvous port already in use, a gloo collective that times out, TIMEOUT, and the abort at
exit that torch 2.x's unjoined threads cause (made here as libstdc++ makes it: a C++ program whose
std::thread is still joinable when main returns; skipped without g++). Not here: a cgroup OOM
kill (the test cluster runs TaskPlugin=task/none, so --mem is not enforced), CUDA out of memory
and NCCL (no GPU); their unit tests use real log text (tests/unit/test_endreason.py)."""

from __future__ import annotations

import re
import secrets
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers.core.model import JobState
from jupyter_tiers.slurm.tier import SlurmTier

from .conftest import RANKS_UP

# In the lane beside the slurm lane (tests/run.sh), sharing the cluster.
pytestmark = pytest.mark.slurm_beside


@pytest.fixture
def notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    nb = tmp_path / "nb"
    nb.mkdir()
    (nb / "mylib_beside.py").write_text("VALUE = 'found'\n")
    monkeypatch.chdir(nb)
    return nb


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port held open on this machine (every node of the test cluster is this machine), on
    IPv4 and IPv6, as a leftover process of an earlier run would hold it."""
    v4 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    v4.bind(("0.0.0.0", 0))
    v4.listen()
    port = v4.getsockname()[1]
    v6 = None
    try:
        v6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        v6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        v6.bind(("::", port))
        v6.listen()
    except OSError:  # no IPv6 here: the IPv4 one is enough
        if v6 is not None:
            v6.close()
        v6 = None
    yield port
    v4.close()
    if v6 is not None:
        v6.close()


def test_a_module_beside_the_notebook_not_synced(box: SlurmTier, notebook: Path) -> None:
    job = box.submit(box.make_spec("import mylib_beside\nprint(mylib_beside.VALUE)\n", name="nosync"))
    status = job.wait(timeout=300)
    assert status.state is JobState.FAILED, job.logs()
    reason = job.end_reason(status)
    assert reason is not None, job.logs()
    first = status.first_failure
    assert first is not None and first.rank == 0
    assert reason.why == (f"rank 0 ({first.node}): No module named 'mylib_beside': mylib_beside sits beside "
                          "the notebook but is not on the cluster")
    assert reason.fix.startswith("run with --sync .")
    summary = job.summary(status)
    # (it may end with what the job used, batch/efficiency.py, when its ranks were sampled)
    assert " — " + reason.line in summary and "\n" not in summary
    # The fix works: with --sync . the same cell runs.
    name = f"synced-{secrets.token_hex(3)}"
    fixed = box.submit(box.make_spec("import mylib_beside\nprint(mylib_beside.VALUE)\n", name=name,
                                     sync=["."]))
    done = fixed.wait(timeout=300)
    assert done.state is JobState.COMPLETED, fixed.logs()
    assert fixed.end_reason(done) is None and "0: found" in fixed.logs()


def test_the_rendezvous_port_already_in_use(box: SlurmTier, held_port: int) -> None:
    body = ("import torch.distributed as dist\n"
            "dist.init_process_group('gloo')  # env://: rank 0 serves the store on MASTER_PORT\n"
            "print('never here', flush=True)\n")
    job = box.submit(box.make_spec(body, name="addrinuse", rdzv_port=held_port))
    status = job.wait(timeout=300)
    assert status.state is JobState.FAILED, job.logs()
    reason = job.end_reason(status)
    assert reason is not None, job.logs()
    assert f"the rendezvous port {held_port} was already in use on " in reason.why, reason
    assert "--rdzv-port" in reason.fix
    assert " — " + reason.line in job.summary(status)


def test_a_gloo_collective_that_times_out_names_the_rank_that_stopped(box: SlurmTier) -> None:
    # The rendezvous has a long timeout (ranks importing torch on a busy machine may arrive many
    # seconds apart); only the group the collective runs in times out after 5 s.
    body = RANKS_UP + (
        "import datetime, time\n"
        "import torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=240))\n"
        "quick = dist.new_group(timeout=datetime.timedelta(seconds=5))\n"
        "all_up()\n"
        "if dist.get_rank() == 1:\n"
        "    print('rank 1 went quiet', flush=True)\n"
        "    time.sleep(300)\n"
        "t = torch.ones(1)\n"
        "dist.all_reduce(t, group=quick)\n")
    job = box.submit(box.make_spec(body, name="gloo-timeout", ntasks_per_node=2))
    status = job.wait(timeout=300)
    assert status.state is JobState.FAILED, job.logs()
    reason = job.end_reason(status)
    assert reason is not None, job.logs()
    assert reason.why.startswith("rank 0 (") and "a gloo collective timed out: rank 1 stopped answering" \
        in reason.why, reason
    assert reason.fix.startswith("read rank 1's last lines")


def test_timeout_says_the_step_reached_of_the_planned(box: SlurmTier) -> None:
    body = ("import time\n"
            "for step in range(1, 100001):\n"
            "    print(f'step {step}/100000 loss {1 / step:.4f}', flush=True)\n"
            "    time.sleep(0.5)\n")
    job = box.submit(box.make_spec(body, name="timeout", time="00:01:00"))
    status = job.wait(timeout=600)
    assert status.state is JobState.TIMEOUT, (status, job.logs(tail=5))
    reason = job.end_reason(status)
    assert reason is not None
    found = re.fullmatch(r"hit the time limit \(00:01:00\) at step (\d+) of 100000 \(0 %\)", reason.why)
    assert found, reason
    last = [ln for ln in job.logs(rank=0).splitlines() if ln.startswith("step ")][-1]
    assert last.startswith(f"step {found[1]}/100000")
    assert reason.fix.startswith("ask for about ") and "(--time)" in reason.fix
    assert " — " + reason.line in job.summary(status)


ABORT_AT_EXIT = r"""set -e
mkdir -p "$JT_JOB_DIR/built"
bin="$JT_JOB_DIR/abort-at-exit-$RANK"
g++ -x c++ -pthread -o "$bin" - <<'CPP'
#include <cstdio>
#include <thread>
int main() {
    std::printf("done: rank work finished\n");
    std::fflush(stdout);
    std::thread watchdog([] {});  // never joined, as a process group's watchdog at exit
    return 0;
}
CPP
touch "$JT_JOB_DIR/built/$RANK"
while [ "$(ls "$JT_JOB_DIR/built" | wc -l)" -lt "$WORLD_SIZE" ]; do sleep 0.1; done
exec "$bin"
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ on this machine to build the program")
def test_terminate_at_exit_after_all_work_suggests_destroy_process_group(box: SlurmTier) -> None:
    job = box.submit(box.make_spec(ABORT_AT_EXIT, name="abort-at-exit", ntasks_per_node=2, shell=True))
    status = job.wait(timeout=300)
    log = job.logs()
    assert status.state is JobState.FAILED, log
    assert "terminate called without an active exception" in log and "done: rank work finished" in log
    first = status.first_failure
    assert first is not None and (first.signal == 6 or first.exit_code == 134), status
    reason = job.end_reason(status)
    assert reason is not None, log
    assert "aborted at exit (terminate called without an active exception) after every rank had " \
        "finished its work" in reason.why
    assert reason.fix == "call dist.destroy_process_group() at the end of the script"
    assert " — " + reason.line in job.summary(status)
