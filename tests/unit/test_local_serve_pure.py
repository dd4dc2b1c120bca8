"""Pure logic of the local serving tier: back-off, round-robin, the status mapping, the log line
parser and the plan (no processes). The parsers get seeded fuzz tests."""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from typing import Any

import pytest

from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.core.model import ServeSpec, ServiceState, ServiceStatus
from jupyter_tiers.local import backoff
from jupyter_tiers.local.roundrobin import RoundRobin
from jupyter_tiers.local.serve_plan import check_local, not_applied, note_for, render_plan, shell_body
from jupyter_tiers.local.serve_status import service_status
from jupyter_tiers.local.serve_watch import parse_log_line

# --- back-off ------------------------------------------------------------------------------------


def test_backoff_doubles_from_ten_seconds_up_to_five_minutes() -> None:
    assert [backoff.delay_for(n) for n in range(0, 8)] == [0, 10, 20, 40, 80, 160, 300, 300]
    assert backoff.delay_for(10_000) == 300  # no overflow however long it crash loops


def test_backoff_resets_after_ten_minutes_of_running() -> None:
    b = backoff.BackOff()
    now = 1000.0
    assert b.exited(started_at=now - 1, now=now) == now + 10
    assert b.exited(started_at=now - 1, now=now) == now + 20
    assert b.exited(started_at=now - 1, now=now) == now + 40
    assert "back-off 40s" in b.message("web-1")
    # ran 10 minutes: back to the first step
    assert b.exited(started_at=now - 600, now=now) == now + 10
    assert b.crashes == 1
    for _ in range(10):
        b.exited(started_at=now, now=now)
    assert b.message("web-1") == "back-off 5m0s restarting failed container=server pod=web-1"


def test_backoff_just_under_ten_minutes_keeps_growing() -> None:
    b = backoff.BackOff()
    b.exited(0.0, 1.0)
    assert b.exited(started_at=0.0, now=599.0) == 599.0 + 20


# --- round-robin ---------------------------------------------------------------------------------


def test_round_robin_takes_turns_and_follows_the_ready_set() -> None:
    rr = RoundRobin()
    assert rr.pick() is None and rr.order() == []
    rr.set_backends([9003, 9001, 9002])
    assert [rr.pick() for _ in range(6)] == [9001, 9002, 9003, 9001, 9002, 9003]
    rr.set_backends([9001, 9003])  # 9002 became not ready: the turn moves on after it
    assert [rr.pick() for _ in range(3)] == [9001, 9003, 9001]
    rr.set_backends([9004])
    assert rr.pick() == 9004 and rr.pick() == 9004


def test_round_robin_order_starts_with_the_next_in_turn() -> None:
    rr = RoundRobin()
    rr.set_backends([1, 2, 3])
    assert rr.order() == [1, 2, 3]
    assert rr.order() == [2, 3, 1]
    assert rr.order() == [3, 1, 2]


def test_round_robin_is_fair_across_threads() -> None:
    rr = RoundRobin()
    rr.set_backends([1, 2, 3, 4])
    got: list[int | None] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(250):
            choice = rr.pick()
            with lock:
                got.append(choice)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert Counter(got) == {1: 250, 2: 250, 3: 250, 4: 250}


def test_round_robin_fuzz_picks_only_ready_backends() -> None:
    rng = random.Random(1010)
    rr = RoundRobin()
    for _ in range(2000):
        backends = rng.sample(range(1, 40), rng.randint(0, 6))
        rr.set_backends(backends)
        for _ in range(rng.randint(0, 5)):
            choice = rr.pick()
            assert (choice is None) == (not backends)
            assert choice is None or choice in backends
        order = rr.order()
        assert sorted(order) == sorted(set(backends))


# --- status mapping ------------------------------------------------------------------------------

DESIRED = {"name": "web", "replicas": 2, "revision": "aaaa", "revision_number": 3, "generation": 5,
           "created_at": 100.0}


def replica(name: str, **fields: Any) -> dict[str, Any]:
    base = {"name": name, "revision": "aaaa", "phase": "Running", "ready": True, "restarts": 0,
            "created_at": 100.0, "port": 1}
    return {**base, **fields}


def state(*replicas: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"observed_generation": 5, "replicas": list(replicas), "created_at": 100.0, **fields}


def status(desired: dict[str, Any] | None = None, st: dict[str, Any] | None = None,
           **kw: Any) -> ServiceStatus:
    return service_status("web", DESIRED if desired is None else desired, st,
                          endpoint="http://127.0.0.1:1", **kw)


def test_ready_when_every_replica_of_the_revision_is_ready() -> None:
    s = status(st=state(replica("web-a"), replica("web-b")))
    assert s.state is ServiceState.READY
    assert (s.desired, s.updated, s.ready, s.available, s.revision) == (2, 2, 2, 2, "3")
    assert [p.node for p in s.pods] == ["localhost", "localhost"]


def test_crash_loop_is_failed_naming_the_replica_and_its_exit() -> None:
    s = status(st=state(replica("web-a"), replica("web-b", ready=False, reason="CrashLoopBackOff",
                                                     exit_code=3, restarts=2, message="back-off 20s")))
    assert s.state is ServiceState.FAILED
    assert s.reason == "pod web-b CrashLoopBackOff (exit 3, 2 restarts)"
    assert s.pods[1].restarts == 2


def test_rolling_update_is_deploying_until_the_old_replicas_are_gone() -> None:
    old = replica("web-old", revision="zzzz")
    s = status(st=state(old, replica("web-a"), replica("web-b")))
    assert s.state is ServiceState.DEPLOYING
    assert s.reason == "1 old replicas are pending termination"
    s = status(st=state(old, replica("web-a", ready=False)))
    assert s.state is ServiceState.DEPLOYING and "1 out of 2 new replicas" in (s.reason or "")
    gone = replica("web-going", phase="Terminating", ready=False)
    assert status(st=state(gone, replica("web-a"), replica("web-b"))).state is ServiceState.READY


def test_degraded_once_rolled_out_and_unhealthy_named() -> None:
    bad = replica("web-b", ready=False, reason="Unhealthy", message="Readiness probe failed: HTTP 503")
    s = status(st=state(replica("web-a"), bad, rolled_out="aaaa"))
    assert s.state is ServiceState.DEGRADED
    assert s.reason == "1 of 2 replicas are available; pod web-b Unhealthy: Readiness probe failed: HTTP 503"
    s = status(st=state(replica("web-a"), bad))  # never rolled out: still deploying
    assert s.state is ServiceState.DEPLOYING and "Unhealthy" in (s.reason or "")


def test_scaled_down_deleted_unobserved_and_lost_supervisor() -> None:
    assert status({**DESIRED, "replicas": 0}, state()).state is ServiceState.SCALED_DOWN
    assert status({**DESIRED, "deleted": True}, state()).state is ServiceState.DELETED
    assert service_status("web", None, None).state is ServiceState.DELETED
    s = status(st=state(observed_generation=4))
    assert s.state is ServiceState.DEPLOYING and "pick up" in (s.reason or "")
    s = status(st=state(replica("web-a"), reason="the supervisor is gone"), supervisor_alive=False)
    assert s.state is ServiceState.FAILED and s.reason == "the supervisor is gone"


def test_the_note_about_ignored_options_is_the_status_message() -> None:
    s = status(st=state(replica("web-a"), replica("web-b")), note="not applied on the local tier: gpus=1")
    assert s.message == "not applied on the local tier: gpus=1"


JUNK: list[Any] = [None, 0, -1, 1.5, True, "", "x", [], {}, [1], {"a": 1}, "Running", "CrashLoopBackOff"]
KEYS = ["name", "revision", "phase", "ready", "restarts", "created_at", "reason", "message", "exit_code",
        "replicas", "observed_generation", "rolled_out", "generation", "deleted", "revision_number", "port"]


def test_status_mapping_fuzz_never_raises() -> None:
    rng = random.Random(20261202)

    def junk_dict() -> dict[str, Any]:
        out: dict[str, Any] = {}
        for _ in range(rng.randint(0, 8)):
            out[rng.choice(KEYS)] = rng.choice(JUNK)
        return out

    for _ in range(3000):
        desired = rng.choice([None, {}, junk_dict(), {**DESIRED, **junk_dict()}])
        st = rng.choice([None, {}, junk_dict(), state(*[{**replica(f"web-{i}"), **junk_dict()}
                                                         for i in range(rng.randint(0, 3))])])
        if isinstance(st, dict) and rng.random() < 0.3:
            st["replicas"] = [rng.choice(JUNK) for _ in range(rng.randint(0, 3))]
        s = service_status("web", desired, st, supervisor_alive=rng.random() < 0.8)
        assert isinstance(s, ServiceStatus) and isinstance(s.state, ServiceState)
        assert s.ready <= len(s.pods)


# --- log lines -----------------------------------------------------------------------------------


def test_log_lines_split_at_the_first_separator() -> None:
    line = parse_log_line(b"web-abc-12345: GET /: 200")
    assert (line.pod, line.text) == ("web-abc-12345", "GET /: 200")
    assert parse_log_line(b"no separator").pod == ""
    assert parse_log_line("web-1: caf\u00e9".encode()).text == "caf\u00e9"


def test_log_line_parser_fuzz() -> None:
    rng = random.Random(77)
    alphabet = b"ab: \xff\xfe\x00-\n\r\t\xc3\xa9"
    for _ in range(5000):
        raw = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        line = parse_log_line(raw)
        assert isinstance(line.text, str) and isinstance(line.pod, str)
        if line.pod:
            assert f"{line.pod}: {line.text}" == raw.decode("utf-8", errors="replace")


# --- plan and spec checks ------------------------------------------------------------------------


def test_plan_lists_cluster_options_as_not_applied_and_never_env_values() -> None:
    spec = ServeSpec(body="vllm serve m --port {port}\n", name="llm", shell=True, image="vllm/vllm:1",
                     gpus=2, node_selector=(("pool", "gpu"),), env=(("TOKEN", "s3cret"),),
                     autoscale=(1, 3, 80), cpu="2", image_pull_policy="Always")
    plan = render_plan(spec)
    assert "Not applied locally: image=vllm/vllm:1, gpus=2, cpu=2, autoscale=1:3:80, " \
           "image_pull_policy=Always, node_selector=pool=gpu" in plan
    assert "vllm serve m --port ${PORT}" in plan and "s3cret" not in plan and "TOKEN" in plan
    assert note_for(not_applied(spec)) == (
        "not applied on the local tier: image=vllm/vllm:1, gpus=2, cpu=2, "
        "autoscale=1:3:80, image_pull_policy=Always, node_selector=pool=gpu")
    assert not_applied(ServeSpec(body="x")) == [] and note_for([]) is None
    assert "strategy=bluegreen" in not_applied(ServeSpec(body="x", strategy="bluegreen"))[0]


def test_plan_names_the_model_handed_over() -> None:
    spec = ServeSpec(body="print(1)", model_path="/data/ckpt/model-3.pt", model_source="local/7 (train)")
    line = "# Model (from job local/7 (train)): /data/ckpt/model-3.pt, read in place; also in JT_MODEL_PATH."
    assert line in render_plan(spec)


def test_shell_body_port_token() -> None:
    assert shell_body("serve --port {port} --host 127.0.0.1") == "serve --port ${PORT} --host 127.0.0.1"
    assert shell_body("echo '{}'") == "echo '{}'"


@pytest.mark.parametrize(("fields", "field"), [
    ({"name": "123"}, "name"), ({"replicas": 65}, "replicas"), ({"name": "Bad_Name"}, "name"),
    ({"readiness": "health"}, "readiness"), ({"port": 0}, "port"), ({"env": (("PORT", "9"),)}, "env"),
])
def test_local_limits_name_the_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as err:
        check_local(ServeSpec(body="x", **fields))
    assert err.value.field == field


def test_plan_is_json_free_of_secrets_for_every_body_form() -> None:
    for shell in (False, True):
        plan = render_plan(ServeSpec(body="print(1)", shell=shell, env=(("K", "value-xyz"),)))
        assert "value-xyz" not in plan and json.dumps(plan)


def test_tail_bytes_matches_the_end_of_the_files_read_as_one(tmp_path: Any) -> None:
    """Seeded: the bounded read of service.log.1 + service.log is the last ``limit`` bytes of
    their concatenation, from its first whole line, and says whether anything was left out."""
    from jupyter_tiers.local.serve_watch import tail_bytes

    rng = random.Random(20261203)
    paths = [tmp_path / "service.log.1", tmp_path / "service.log"]
    for _ in range(300):
        contents = []
        for path in paths:
            if rng.random() < 0.2:
                path.unlink(missing_ok=True)
                contents.append(b"")
                continue
            data = b"".join(rng.choice([b"a", b"bb", b"\n", b"web-0: x\n", b"\xff"])
                            for _ in range(rng.randint(0, 60)))
            path.write_bytes(data)
            contents.append(data)
        whole = b"".join(contents)
        limit = rng.randint(0, 150)
        got, cut = tail_bytes(paths, limit)
        assert cut == (len(whole) > limit)
        want = whole[len(whole) - limit:] if cut else whole
        if cut:
            want = want[want.find(b"\n") + 1:] if b"\n" in want else b""
        assert got == want and len(got) <= limit


# --- an ended replica's output -------------------------------------------------------------------
def test_an_exit_waits_for_the_log_thread_but_not_for_ever() -> None:
    from jupyter_tiers.local.serve_supervisor import DRAIN_S, output_drained

    assert output_drained(None, 100.0, 100.0)  # never started: nothing to wait for
    gate = threading.Event()
    reader = threading.Thread(target=gate.wait)
    reader.start()
    try:
        assert not output_drained(reader, 100.0, 100.0 + DRAIN_S / 2)  # still copying the pipe
        assert output_drained(reader, 100.0, 100.0 + DRAIN_S)  # something it left holds the pipe
    finally:
        gate.set()
        reader.join()
    assert output_drained(reader, 100.0, 100.0)  # reached the end of the pipe
