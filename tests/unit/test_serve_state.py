"""viewstate.serve: ServiceStatus / PodLogLine -> the ServeView's traits and rows (pure)."""

from __future__ import annotations

import random

import pytest

from jupyter_tiers.app.viewstate.serve import (
    MAX_EVENTS,
    banner_text,
    current_revision,
    event_rows,
    fallback_summary,
    format_line,
    line_rows,
    pod_problem,
    pod_rows,
    state_label,
    status_traits,
)
from jupyter_tiers.core.errors import SpecError, TiersError
from jupyter_tiers.core.model import EventInfo, PodInfo, PodLogLine, ServiceState, ServiceStatus
from jupyter_tiers.serving.status import check_track, track_pods, with_canary

NOW = 1_700_000_000.0


def test_pod_problem_names_the_reason_the_exit_code_and_the_words() -> None:
    crash = PodInfo("web-7c9f-x2", phase="Running", reason="CrashLoopBackOff", exit_code=1,
                    message="back-off 10s restarting failed container", restarts=3)
    assert pod_problem(crash) == (
        "CrashLoopBackOff (exit 1, 3 restarts): back-off 10s restarting failed container")
    oom = PodInfo("p", reason="OOMKilled", exit_code=137)
    assert pod_problem(oom) == "OOMKilled (exit 137)"
    pull = PodInfo("p", reason="ImagePullBackOff", message='Back-off pulling image "nope:1"')
    assert pod_problem(pull) == 'ImagePullBackOff: Back-off pulling image "nope:1"'
    sched = PodInfo("p", reason="Unschedulable",
                    message="0/3 nodes are available: 3 Insufficient nvidia.com/gpu.\n")
    assert pod_problem(sched) == "Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    probe = PodInfo("p", phase="Running", reason="Unhealthy",
                    message="readiness probe failing: HTTP probe failed with statuscode: 503")
    assert pod_problem(probe).startswith("Unhealthy: readiness probe failing")
    # the exit code is only shown where a container exited
    assert pod_problem(PodInfo("p", reason="ErrImagePull", exit_code=2)) == "ErrImagePull"


def test_a_ready_pod_or_one_without_a_reason_has_no_problem() -> None:
    assert pod_problem(PodInfo("p", phase="Running", ready=True, reason="Unhealthy")) == ""
    assert pod_problem(PodInfo("p", phase="Pending")) == ""


def _pods() -> tuple[PodInfo, ...]:
    return (
        PodInfo("web-old-aaaaa", phase="Running", ready=True, node="n1", started_at=NOW - 3600,
                revision="old"),
        PodInfo("web-new-bbbbb", phase="Running", ready=False, restarts=2, node="n2",
                started_at=NOW - 30, revision="new", reason="CrashLoopBackOff", exit_code=1),
        PodInfo("web-new-aaaaa", phase="Pending", started_at=NOW - 20, revision="new",
                reason="Unschedulable", message="0/2 nodes are available"),
        PodInfo("web-old-ccccc", phase="Terminating", started_at=NOW - 3500, revision="old"),
    )


def test_current_revision_is_the_newest_pods() -> None:
    assert current_revision(_pods()) == "new"
    assert current_revision(()) is None
    # a terminating pod never makes its revision current
    late = (*_pods(), PodInfo("web-old-ddddd", phase="Terminating", started_at=NOW, revision="old"))
    assert current_revision(late) == "new"


def test_pod_rows_put_the_current_revision_first() -> None:
    rows = pod_rows(ServiceStatus("web", ServiceState.FAILED, pods=_pods()), NOW)
    assert [r[0] for r in rows] == ["web-new-aaaaa", "web-new-bbbbb", "web-old-aaaaa", "web-old-ccccc"]
    name, phase, ready, restarts, node, age, problem, current, track = rows[1]
    assert (name, phase, ready, restarts, node, age, current) == ("web-new-bbbbb", "Running", False, 2,
                                                                  "n2", 30, True)
    assert track == ""  # no canary: no track
    assert problem == "CrashLoopBackOff (exit 1, 2 restarts)"
    assert rows[0][4] == "" and rows[0][6] == "Unschedulable: 0/2 nodes are available"
    assert [r[7] for r in rows] == [True, True, False, False]
    assert rows[2][6] == ""  # ready: no problem shown


def test_pods_without_revisions_all_count_as_current() -> None:
    rows = pod_rows(ServiceStatus("web", ServiceState.READY, pods=(PodInfo("b"), PodInfo("a"))), NOW)
    assert [(r[0], r[5], r[7]) for r in rows] == [("a", -1, True), ("b", -1, True)]


def test_event_rows_keep_the_newest_warnings_only() -> None:
    events = tuple(
        EventInfo(type="Warning" if i % 2 else "Normal", reason=f"R{i}", message=f"said  {i}\n",
                  object=f"Pod/web-{i}", count=i, at=NOW - 100 + i)
        for i in range(2 * MAX_EVENTS + 6)
    )
    rows = event_rows(events, NOW)
    assert len(rows) == MAX_EVENTS
    assert rows[-1] == ["R45", "Pod/web-45", "said 45", 45, 55, False]
    assert all(int(r[0][1:]) % 2 for r in rows)
    assert event_rows((EventInfo("Warning", "X", "m", "Pod/p"),), NOW)[0][4] == -1


def test_event_rows_collapse_repeats_and_leave_out_pods_that_are_gone() -> None:
    """Issue 29 §7: the same warning twice is one row (counts added, the newest time); events of
    pods the service no longer has are marked gone, and dropped under a READY service."""
    old = EventInfo("Warning", "BackOff", "Back-off restarting  failed container", "Pod/web-old", count=7,
                    at=NOW - 300)
    again = EventInfo("Warning", "BackOff", "Back-off restarting failed container", "Pod/web-old", count=2,
                      at=NOW - 200)
    live = EventInfo("Warning", "Unhealthy", "Readiness probe failed", "Pod/web-a", count=1, at=NOW - 10)
    canary = EventInfo("Warning", "Unhealthy", "Readiness probe failed", "Pod/web-canary-x", at=NOW - 5)
    svc = EventInfo("Warning", "FailedCreate", "quota", "Deployment/web", at=NOW - 1)
    events = (old, again, live, canary, svc)
    deploying = event_rows(events, NOW, {"web-a", "web-canary-x"}, ServiceState.DEPLOYING)
    assert deploying == [
        ["BackOff", "Pod/web-old", "Back-off restarting failed container", 9, 200, True],
        ["Unhealthy", "Pod/web-a", "Readiness probe failed", 1, 10, False],
        ["Unhealthy", "Pod/web-canary-x", "Readiness probe failed", 1, 5, False],
        ["FailedCreate", "Deployment/web", "quota", 1, 1, False],
    ]
    ready = event_rows(events, NOW, {"web-a", "web-canary-x"}, ServiceState.READY)
    assert [r[1] for r in ready] == ["Pod/web-a", "Pod/web-canary-x", "Deployment/web"]
    # through the status: a READY service with only an old pod's crash events shows none of them
    status = ServiceStatus("web", ServiceState.READY, desired=1, ready=1, available=1,
                           pods=(PodInfo("web-a", phase="Running", ready=True),), events=(old, again))
    assert status_traits(status, NOW)["events"] == []
    failing = ServiceStatus("web", ServiceState.FAILED, pods=(PodInfo("web-a"),), events=(old, live))
    assert [r[5] for r in status_traits(failing, NOW)["events"]] == [True, False]


def test_banner_is_set_while_the_api_is_in_trouble() -> None:
    ok = ServiceStatus("web", ServiceState.READY)
    assert banner_text(ok) == ""
    down = ServiceStatus("web", ServiceState.READY, api_reachable=False, message="connection refused")
    assert banner_text(down) == "Kubernetes API unreachable: connection refused"
    assert banner_text(ServiceStatus("web", ServiceState.UNKNOWN, api_reachable=False)) == \
        "Kubernetes API unreachable"
    assert banner_text(ServiceStatus("web", ServiceState.READY, message="403 Forbidden")) == "403 Forbidden"


def test_status_traits() -> None:
    status = ServiceStatus(
        "web", ServiceState.DEPLOYING, desired=3, updated=2, ready=1, available=1, revision="4",
        endpoint="http://web.team.svc:8000", created_at=NOW - 75, pods=_pods(),
        reason="2 out of 3 new replicas have been updated",
    )
    traits = status_traits(status, NOW)
    assert traits["state"] == "DEPLOYING"
    assert (traits["desired"], traits["updated"], traits["ready"], traits["available"]) == (3, 2, 1, 1)
    assert traits["revision"] == "4" and traits["endpoint"] == "http://web.team.svc:8000"
    assert traits["age_s"] == 75
    assert traits["reason"] == "2 out of 3 new replicas have been updated"
    assert traits["settled"] is False and traits["terminal"] is False
    assert len(traits["pods"]) == 4 and traits["events"] == [] and traits["banner"] == ""
    gone = status_traits(ServiceStatus("web", ServiceState.DELETED), NOW)
    assert gone["settled"] and gone["terminal"] and gone["age_s"] == -1 and gone["revision"] == ""


def test_line_rows_flag_errors() -> None:
    lines = [PodLogLine("INFO: started", "web-1"), PodLogLine("Traceback (most recent call last):", "web-2"),
             PodLogLine("ValueError: bad", "web-2")]
    assert line_rows(lines) == [["web-1", "INFO: started", False],
                                ["web-2", "Traceback (most recent call last):", True],
                                ["web-2", "ValueError: bad", True]]
    assert format_line(lines[0]) == "web-1: INFO: started"


def test_state_label_and_fallback_summary() -> None:
    ready = ServiceStatus("web", ServiceState.READY, desired=2, ready=2, available=2,
                          endpoint="http://web.ns.svc:8000")
    assert state_label(ready) == "READY 2/2"
    assert state_label(ServiceStatus("web", ServiceState.DEPLOYING, desired=2)) == "DEPLOYING 0/2"
    assert state_label(ServiceStatus("web", ServiceState.DELETED)) == "DELETED"
    assert fallback_summary(ready, 72) == "service web READY 2/2 after 00:01:12 — http://web.ns.svc:8000"
    failed = ServiceStatus("web", ServiceState.FAILED, desired=2, reason="pod web-x CrashLoopBackOff")
    assert fallback_summary(failed) == "service web FAILED 0/2: pod web-x CrashLoopBackOff"


def test_status_traits_carry_the_canary_line() -> None:
    from jupyter_tiers.core.model import CanaryStatus

    base = ServiceStatus("web", ServiceState.READY, desired=9, ready=9, available=9)
    assert status_traits(base, 0.0)["canary"] == ""
    with_canary = ServiceStatus("web", ServiceState.READY, desired=9, ready=9, available=9,
                                canary=CanaryStatus(percent=10, desired=1, ready=1, state=ServiceState.READY))
    assert status_traits(with_canary, 0.0)["canary"] == "canary 10 %: READY 1/1, 0 restarts"


# --- a canary beside the stable revision (issue 29 §3) -----------------------------------------
def _with_a_canary() -> ServiceStatus:
    stable = ServiceStatus("web", ServiceState.READY, desired=1, updated=1, ready=1, available=1, pods=(
        PodInfo("web-aaa-1", phase="Running", ready=True, started_at=NOW - 60, revision="aaa"),))
    canary = ServiceStatus("web", ServiceState.READY, desired=1, updated=1, ready=1, available=1, pods=(
        PodInfo("web-canary-bbb-1", phase="Running", ready=True, started_at=NOW - 5, revision="bbb"),))
    return with_canary(stable, 50, canary)


def test_a_canary_s_pods_are_listed_marked_and_counted_in_the_header() -> None:
    status = _with_a_canary()
    assert [(p.name, p.track) for p in status.pods] == [("web-aaa-1", "stable"),
                                                        ("web-canary-bbb-1", "canary")]
    rows = pod_rows(status, NOW)
    # Each track has its own current revision: the stable pod is not "previous" for being older.
    assert [(r[0], r[7], r[8]) for r in rows] == [("web-aaa-1", True, "stable"),
                                                  ("web-canary-bbb-1", True, "canary")]
    traits = status_traits(status, NOW)
    assert traits["ready"] == 1 and traits["desired"] == 1 and traits["canary_counts"] == [1, 1]
    assert state_label(status) == "READY 2/2 (stable 1/1, canary 1/1)"
    plain = ServiceStatus("web", ServiceState.READY, desired=2, ready=2, pods=(PodInfo("p", ready=True),))
    assert status_traits(plain, NOW)["canary_counts"] == [] and pod_rows(plain, NOW)[0][8] == ""


def test_track_pods_picks_one_revision_s_ready_pods() -> None:
    status = _with_a_canary()
    assert [p.name for p in track_pods(status, "canary")] == ["web-canary-bbb-1"]
    assert [p.name for p in track_pods(status, "stable")] == ["web-aaa-1"]
    assert len(track_pods(status, None)) == len(track_pods(status, "both")) == 2
    plain = ServiceStatus("web", ServiceState.READY, pods=(PodInfo("p", ready=True),))
    assert [p.name for p in track_pods(plain, "stable")] == ["p"]
    with pytest.raises(TiersError, match="runs no canary"):
        track_pods(plain, "canary")


def test_check_track_refuses_anything_else_naming_what_is_allowed() -> None:
    rng = random.Random(29)
    alphabet = "stablecanryboh-_ ST\n\x00é"
    for _ in range(2000):
        value: object = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9)))
        if rng.random() < 0.1:
            value = rng.choice([1, 0.5, [], {}, b"canary", True])
        if value in ("stable", "canary", "both", None):
            continue
        with pytest.raises(SpecError, match="track: stable, canary or both"):
            check_track(value)  # type: ignore[arg-type]
    assert check_track("both") is None and check_track(None) is None and check_track("canary") == "canary"
