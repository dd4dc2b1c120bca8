"""Canary rendering (k8s/canary.py), the replica split (servespec.canary_replicas) and the
canary's part of a summary line: pure."""

from __future__ import annotations

import random

import pytest
from IPython.core.error import UsageError

from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.core.model import PodInfo, ServeSpec, ServiceState, ServiceStatus
from jupyter_tiers.k8s.canary import (
    TRACK_LABEL,
    canary_objects,
    is_canary_pod,
    promoted_object,
    promoted_template,
    split_pods,
)
from jupyter_tiers.k8s.render import render_manifests
from jupyter_tiers.serving.status import canary_status, summary_line
from jupyter_tiers.spec.servespec import canary_replicas, validate_serve_spec
from tests.unit.serve_shell import Shell, serve_shell

__all__ = ["serve_shell"]  # the fixture

BODY = "print('v2')\n"


def spec(**kw: object) -> ServeSpec:
    base = dict(body=BODY, name="web", image="python:3.11-slim", replicas=4, env=(("A", "2"),))
    base.update(kw)
    return ServeSpec(**base)  # type: ignore[arg-type]  # test data of the right types


@pytest.mark.parametrize(("total", "percent", "count"), [(4, 25, 1), (10, 10, 1), (10, 50, 5), (3, 1, 1),
                                                         (2, 50, 1), (10, 94, 9), (100, 99, 99)])
def test_canary_replicas_split(total: int, percent: int, count: int) -> None:
    assert canary_replicas(total, percent) == count


@pytest.mark.parametrize(("total", "percent"), [(1, 50), (0, 10), (10, 95), (2, 80)])
def test_canary_replicas_refuses_a_split_without_a_stable_replica(total: int, percent: int) -> None:
    with pytest.raises(SpecError) as err:
        canary_replicas(total, percent)
    assert "leaves no stable replica" in str(err.value)


@pytest.mark.parametrize(("kw", "words"), [
    ({"canary": 0}, "from 1 to 99"), ({"canary": 100}, "from 1 to 99"), ({"canary": True}, "from 1 to 99"),
    ({"canary": 10, "strategy": "bluegreen"}, "bluegreen"),
    ({"canary": 10, "autoscale": (1, 4, 50), "cpu": "100m"}, "autoscaler"),
    ({"canary": 80, "replicas": 2}, "no stable replica"),
])
def test_validation_names_what_is_wrong(kw: dict[str, object], words: str) -> None:
    with pytest.raises(SpecError) as err:
        validate_serve_spec(spec(**kw))
    assert err.value.field == "canary" and words in str(err.value)


def test_canary_objects_are_a_renamed_second_deployment_without_the_service() -> None:
    objects = render_manifests(spec(canary=25), namespace="team")
    out = canary_objects(objects, "web", 1)
    assert [(o["kind"], o["metadata"]["name"]) for o in out] == [
        ("ConfigMap", "web-canary-code"), ("Secret", "web-canary-env"), ("Deployment", "web-canary")]
    dep = out[-1]
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "web", TRACK_LABEL: "canary"}
    pod = dep["spec"]["template"]
    assert pod["metadata"]["labels"][TRACK_LABEL] == "canary"
    text = repr(pod)
    assert "'web-canary-code'" in text and "'web-canary-env'" in text
    assert "'web-code'" not in text and "'web-env'" not in text
    # the input is left as it was (the tier renders once)
    assert objects[2]["metadata"]["name"] == "web" and TRACK_LABEL not in repr(objects)


def test_promotion_turns_the_canary_back_into_the_stable_revision() -> None:
    objects = render_manifests(spec(), namespace="team")
    stable_template = objects[2]["spec"]["template"]
    canary = canary_objects(objects, "web", 1)
    live = {**canary[-1]["spec"]["template"]}
    labels = {**live["metadata"]["labels"], "pod-template-hash": "abc"}
    live["metadata"] = {**live["metadata"], "labels": labels}
    assert promoted_template(live, "web") == stable_template
    cm = {**canary[0], "metadata": {**canary[0]["metadata"], "uid": "u1", "resourceVersion": "7",
                                   "managedFields": [{}]}}
    back = promoted_object(cm, "web")
    assert back == objects[0]


def test_split_pods_and_status() -> None:
    pods = [{"metadata": {"name": "a", "labels": {"app.kubernetes.io/name": "web"}}},
            {"metadata": {"name": "b", "labels": {"app.kubernetes.io/name": "web", TRACK_LABEL: "canary"}}}]
    stable, canary = split_pods(pods)
    assert [p["metadata"]["name"] for p in stable] == ["a"]
    assert [p["metadata"]["name"] for p in canary] == ["b"]
    assert is_canary_pod(pods[1]) and not is_canary_pod(pods[0]) and not is_canary_pod({})
    of_canary = ServiceStatus(name="web", state=ServiceState.FAILED, desired=1, available=0,
                              reason="pod web-canary-x CrashLoopBackOff (exit 1, 3 restarts)",
                              pods=(PodInfo(name="web-canary-x", restarts=3),))
    cs = canary_status(10, of_canary)
    assert (cs.percent, cs.ready, cs.desired, cs.restarts, cs.pods) == (10, 0, 1, 3, ("web-canary-x",))
    stable_status = ServiceStatus(name="web", state=ServiceState.READY, desired=9, available=9, canary=cs)
    line = summary_line(stable_status)
    assert line == ("service web READY 9/9; canary 10 %: FAILED 0/1, 3 restarts "
                    "(pod web-canary-x CrashLoopBackOff (exit 1, 3 restarts))")


def test_renaming_never_touches_a_value_that_only_contains_a_name() -> None:
    """Seeded fuzz: only whole strings equal to an object name are renamed, whatever else the
    template holds (env names, args, annotations)."""
    rng = random.Random(20261203)
    alphabet = "web-codenvsya/:_ "
    for _ in range(300):
        words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(6)]
        template = {"metadata": {"labels": {"app.kubernetes.io/name": "web"}},
                    "spec": {"containers": [{"name": "server", "args": words}]}}
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                      "spec": {"replicas": 3, "selector": {"matchLabels": {"app.kubernetes.io/name": "web"}},
                               "template": template}}
        canary = canary_objects([deployment], "web", 1)[0]
        args = canary["spec"]["template"]["spec"]["containers"][0]["args"]
        for before, after in zip(words, args, strict=True):
            assert after == (f"web-canary{before[3:]}" if before in ("web-code", "web-env", "web-sync")
                             else before)
        assert promoted_template(canary["spec"]["template"], "web") == template


def test_the_magic_renders_a_canary_and_refuses_a_bad_share(serve_shell: Shell,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    serve_shell.run_cell_magic("k8s_serve", "--name web --replicas 10 --canary 10 --dry-run", BODY)
    out = capsys.readouterr().out
    assert "name: web-canary\n" in out and "jupyter-tiers/track: canary" in out
    assert "kind: Service\n" not in out and "replicas: 1\n" in out
    for line, words in (("--replicas 10 --canary 100", "from 1 to 99"),
                        ("--replicas 1 --canary 50", "leaves no stable replica"),
                        ("--replicas 2 --canary x", "--canary")):
        with pytest.raises(UsageError) as err:
            serve_shell.run_cell_magic("k8s_serve", f"--name web {line} --dry-run", BODY)
        assert words in str(err.value) and "\n" not in str(err.value).strip(), err.value
