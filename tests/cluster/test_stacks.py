"""Issue 37 on the real cluster: ``job.stacks()`` of a 2-node x 2-rank job whose even ranks block
in one function and odd ranks in another shows both stacks, ranks grouped across the nodes,
asked with one file in the job directory over SSH (no scheduler call).

Shares the cluster with the other lanes' jobs: no node is assumed (the groups' nodes are the
ones the ranks recorded), every wait is for a state or a line with a bound of minutes, and no
assertion is about time."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from jupyter_tiers.core.model import JobState, RankPhase
from jupyter_tiers.slurm.commands import unwrap_slurm
from jupyter_tiers.slurm.tier import SlurmTier
from tests.helpers import wait_for

# In the lane beside the slurm lane (tests/run.sh), sharing the cluster.
pytestmark = [pytest.mark.cluster, pytest.mark.slurm_beside]

# Every rank blocks at one line (a sleep the job is cancelled out of), so ranks in the same
# place have the same stack whenever they are asked.
BODY = textwrap.dedent("""\
    import os, threading, time
    rank = int(os.environ["RANK"])
    def prefetch():
        time.sleep(3600)
    def all_reduce():
        print("in place", flush=True)
        time.sleep(3600)
    def save_checkpoint():
        print("in place", flush=True)
        time.sleep(3600)
    threading.Thread(target=prefetch, daemon=True).start()
    (all_reduce if rank % 2 == 0 else save_checkpoint)()
    """)


@pytest.mark.timeout(1200)  # the job may wait minutes for two nodes while the other lanes run
def test_stacks_of_a_2x2_job_group_ranks_across_nodes(box: SlurmTier,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    job = box.submit(box.make_spec(BODY, name="stacks", nodes=2, ntasks_per_node=2))
    try:
        def in_place() -> bool:
            return all("in place" in job.logs(rank=r).splitlines() for r in range(4))

        wait_for(in_place, "every rank in place", 900, interval=2)
        status = job.status()
        assert status.state is JobState.RUNNING and all(r.phase is RankPhase.RUNNING for r in status.ranks)
        node_of = {r.rank: r.node for r in status.ranks}
        assert len(set(node_of.values())) == 2, node_of
        commands: list[list[str]] = []
        run = box.transport.run

        def spy(argv: list[str], *args: Any, **kwargs: Any) -> Any:
            commands.append(list(argv))
            return run(argv, *args, **kwargs)

        monkeypatch.setattr(box.transport, "run", spy)
        stacks = job.stacks(timeout=120)
        monkeypatch.setattr(box.transport, "run", run)  # (undo() would also drop tiers_yaml's env)
        # one request for the whole job, and not one Slurm command (no squeue, no scancel)
        assert sum("jt-stacks-ask" in argv for argv in commands) == 1, commands
        assert all(unwrap_slurm(argv) == argv and argv[0] not in ("scancel", "srun") for argv in commands)
        assert [g.ranks for g in stacks.groups] == [(0, 2), (1, 3)], str(stacks)
        places = ((stacks.groups[0], "all_reduce", 8), (stacks.groups[1], "save_checkpoint", 11))
        for group, func, line in places:
            assert sorted(group.nodes) == sorted({node_of[r] for r in group.ranks}), str(stacks)
            main, worker = group.threads
            assert main.main and [(f.func, f.cell_line) for f in main.frames] == [
                ("<module>", 13), (func, line)], str(stacks)  # the magic line is line 1
            assert [(f.func, f.cell_line) for f in worker.frames][-1] == ("prefetch", 5), str(stacks)
        text = str(stacks)
        assert "ranks 0,2 (2) on " in text and "ranks 1,3 (2) on " in text, text
        assert "cell line 13, in <module>:  (all_reduce if rank % 2 == 0 else save_checkpoint)()" in text
        assert ".rank-boot.py" not in text and "runpy" not in text and not stacks.missing, text
    finally:
        job.cancel()
    assert job.wait(timeout=600).state is JobState.CANCELLED
