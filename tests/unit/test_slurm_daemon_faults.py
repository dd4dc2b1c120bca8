"""What a user sees when a Slurm daemon fails (issue 18 item 2), the pure parts: a job ended
NODE_FAIL names the node the scheduler gave up and the ranks that ran there (one slurmd killed
mid-job: the sinfo parser, the reason line, the argv, the merge); history with slurmdbd down is
one line saying so."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from jupyter_tiers.batch.status import merge_status, node_failure_reason
from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.errors import ControllerUnreachable, SpecError, TiersError
from jupyter_tiers.core.model import JobState, RankPhase, RankState, SchedulerInfo
from jupyter_tiers.slurm.commands import node_states_argv, unwrap_slurm
from jupyter_tiers.slurm.history import history_result
from jupyter_tiers.slurm.parse import parse_failed_nodes
from jupyter_tiers.slurm.tier import SlurmTier
from jupyter_tiers.transport.exchange import CommandResult

# sinfo -h -N -n node[1-2] -o '%N|%T|%E' as the sandbox cluster printed it with node2's slurmd
# killed and the node set down (one row per partition).
SINFO = """\
node1|idle|none
node1|idle|none
node2|down*|chaos: slurmd killed
node2|down*|chaos: slurmd killed
"""


def test_parse_failed_nodes_names_down_drained_and_silent_nodes_once() -> None:
    assert parse_failed_nodes(SINFO) == {"node2": "down, not responding: chaos: slurmd killed"}
    assert parse_failed_nodes("n3|idle*|none\nn4|drained|maint\nn5|mixed|none\nn6|down|(null)\n") == {
        "n3": "not responding", "n4": "drained: maint", "n6": "down"}
    assert parse_failed_nodes("") == {}
    assert parse_failed_nodes("garbage\n|down|x\nbad name|down|x\n") == {}


def test_parse_failed_nodes_fuzz_never_raises_and_keeps_names_plain() -> None:
    rng = random.Random(20261203)
    alphabet = "node12|*~#-_ .\n\t[]()downidledrainfail:\x00é"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 120)))
        got = parse_failed_nodes(text)
        for node, why in got.items():
            assert node and "|" not in node and " " not in node and "\n" not in node
            assert why and "\n" not in why and len(why) < 300


def test_reason_names_the_node_and_its_ranks() -> None:
    ranks = [RankState(0, RankPhase.STOPPED, node="node1"), RankState(1, RankPhase.STOPPED, node="node2"),
             RankState(2, RankPhase.STOPPED, node="node2")]
    assert (node_failure_reason([("node2", "down: chaos")], ranks)
            == "node failure: node2 (ranks 1, 2) down: chaos")
    assert node_failure_reason([("node3", "not responding")], ranks) == "node failure: node3 not responding"


def test_merge_status_puts_the_failed_node_in_the_reason() -> None:
    ranks = {0: RankState(0, RankPhase.RUNNING, node="node1"),
             1: RankState(1, RankPhase.RUNNING, node="node2")}
    sched = SchedulerInfo("7", JobState.NODE_FAIL, reason="NodeDown", nodelist="node[1-2]",
                          failed_nodes=(("node2", "down: Not responding"),))
    status = merge_status("7", sched, ranks, 2)
    assert status.state is JobState.NODE_FAIL
    assert status.reason == "node failure: node2 (rank 1) down: Not responding"
    # Without names (sinfo failed, or the node is back already) Slurm's own reason stays.
    plain = merge_status("7", SchedulerInfo("7", JobState.NODE_FAIL, reason="NodeDown"), ranks, 2)
    assert plain.reason == "NodeDown"


def test_node_states_argv_takes_only_host_lists() -> None:
    assert unwrap_slurm(node_states_argv(["node[1-2]", "gpu01"])) == [
        "sinfo", "-h", "-N", "-n", "node[1-2],gpu01", "-o", "%N|%T|%E"]
    for bad in (["node1; rm -rf /"], ["$(id)"], [], ["a b"]):
        with pytest.raises(SpecError, match="nodelist"):
            node_states_argv(bad)


def test_history_with_slurmdbd_down_is_one_line_saying_so() -> None:
    # sacct's answer on the sandbox cluster after `cluster.sh stop-dbd`.
    err = "sacct: error: Problem talking to the database: Connection refused\n"
    with pytest.raises(TiersError) as got:
        history_result(1, "", err)
    text = str(got.value)
    assert "\n" not in text and "slurmdbd" in text and "Connection refused" in text
    assert text.startswith("Slurm accounting (slurmdbd) does not answer")


class _Transport:
    """Answers each command by its program's name (exit, stdout, stderr), as the cluster did."""

    def __init__(self, answers: dict[str, tuple[int, str, str]]) -> None:
        self.answers = answers
        self.ran: list[str] = []

    def run(self, argv, stdin=b"", check=True, timeout=None):  # type: ignore[no-untyped-def]  # a fake
        name = unwrap_slurm(argv)[0]
        self.ran.append(name)
        code, out, err = self.answers[name]
        return CommandResult(tuple(argv), code, out.encode(), err.encode())

    def close(self) -> None:
        pass


DBD_DOWN = (1, "", "sacct: error: Problem talking to the database: Connection refused\n")


def _tier(tmp_path: Path, answers: dict[str, tuple[int, str, str]]) -> SlurmTier:
    profile = Profile(name="box", tier="slurm", settings={"host": "h", "workdir": "~/jt"})
    return SlurmTier(profile, Registry(tmp_path / "r.sqlite"), transport=_Transport(answers))  # type: ignore[arg-type]  # a fake


def test_tier_history_with_slurmdbd_down_is_not_called_a_controller_outage(tmp_path: Path) -> None:
    """Found by the chaos run: sacct's 'Connection refused' (from slurmdbd) matched the
    controller-unreachable markers, and history said sacct's bare words."""
    tier = _tier(tmp_path, {"sacct": DBD_DOWN})
    with pytest.raises(TiersError) as got:
        tier.history()
    assert not isinstance(got.value, ControllerUnreachable)
    assert str(got.value).startswith("Slurm accounting (slurmdbd) does not answer")


def test_a_job_purged_from_squeue_is_read_from_scontrol_while_slurmdbd_is_down(tmp_path: Path) -> None:
    tier = _tier(tmp_path, {"sacct": DBD_DOWN,
                            "scontrol": (0, "JobId=41 JobName=x JobState=COMPLETED Reason=None "
                                            "NodeList=node1 ExitCode=0:0\n", "")})
    found = tier._finished(["41"])
    assert found["41"].state is JobState.COMPLETED
    assert tier.transport.ran == ["sacct", "scontrol"]  # type: ignore[attr-defined]  # the fake's


def test_a_listing_counts_the_watchers_answers_as_the_cluster_seen(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A job RUNNING for an hour, its widget's watcher hearing from the cluster all along: one
    failed `%tiers jobs` (a blip) must not show it UNKNOWN "last seen RUNNING 1 h ago" because
    the registry's record last changed an hour ago."""
    from jupyter_tiers import api
    from jupyter_tiers.app import actions
    from jupyter_tiers.config.registry import JobRecord

    profile = Profile(name="hpc", tier="slurm", settings={"host": "h", "workdir": "~/jt"})
    tier = SlurmTier(profile, Registry(tmp_path / "r.sqlite"))
    monkeypatch.setitem(api._tiers, ("hpc", "batch"), tier)
    now = 10_000.0
    assert actions._answered(["hpc"]) == dict(actions._last_answer)  # no watcher: nothing new
    tier.watcher.answered_at = now - 20
    assert actions._answered(["hpc"])["hpc"] == now - 20
    assert actions._answered(["other"]).get("hpc") == actions._last_answer.get("hpc")  # not asked
    rec = JobRecord(profile="hpc", tier="slurm", job_id="1", name="t", state="RUNNING",
                    submitted_at=now - 3600, updated_at=now - 3600, world_size=1)
    items = [actions.item_from(rec, None, now)]
    _, shown = actions.mark_stale([rec], items, {"hpc": 300.0}, actions._answered(["hpc"]), now)
    assert shown[0].state == "RUNNING"
    _, silent = actions.mark_stale([rec], items, {"hpc": 300.0}, {}, now)
    assert silent[0].state == "UNKNOWN"  # with nothing heard, an hour is stale
