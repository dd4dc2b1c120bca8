"""Regression tests from an adversarial review of the serving tier (no cluster: fake clients and
the pure renderer)."""

from __future__ import annotations

import functools
import inspect
import re
import shlex
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.error import UsageError

from jupyter_tiers.core.model import PodLogLine
from jupyter_tiers.k8s.client import KubeClient
from jupyter_tiers.k8s.watch import SINCE_MARGIN_S, PodLogFollower, container_instance, since_seconds
from tests import helpers
from tests.unit.serve_shell import Shell, serve_shell

__all__ = ["serve_shell"]  # the fixture

GUARD = 10.0  # seconds; bounds every wait


wait_for = functools.partial(helpers.wait_for, timeout=GUARD, interval=0.02)


# --- pod log follower ------------------------------------------------------------------------


class _Stream:
    """A finished streamed HTTP body, as the client returns with _preload_content=False."""

    def __init__(self, lines: list[str]) -> None:
        self.body = "".join(line + "\n" for line in lines).encode()

    def stream(self, amt: Any = None, decode_content: bool = False) -> Iterator[bytes]:
        yield self.body

    def release_conn(self) -> None:
        pass

    def close(self) -> None:
        pass


class _LogApi:
    """read_namespaced_pod_log checked against the real client's signature: the generated
    client refuses a keyword it does not declare (it has since_seconds, not since_time)."""

    def __init__(self, streams: list[list[str]]) -> None:
        from kubernetes.client import CoreV1Api

        self.signature = inspect.signature(CoreV1Api.read_namespaced_pod_log)
        self.streams = streams
        self.calls: list[dict[str, Any]] = []

    def read_namespaced_pod_log(self, *args: Any, **kwargs: Any) -> _Stream:
        self.signature.bind(None, *args, **kwargs)  # TypeError for an unknown keyword
        self.calls.append(kwargs)
        if not self.streams:
            from kubernetes.client.exceptions import ApiException

            raise ApiException(status=404, reason="Not Found")
        return _Stream(self.streams.pop(0))


class _FakeClient(KubeClient):
    def __init__(self, core: Any) -> None:
        super().__init__({})
        self._core = core

    def core(self) -> Any:
        return self._core


def test_a_reopened_log_stream_resumes_and_the_follower_of_a_gone_pod_ends() -> None:
    """The second stream (after a container restart or a dropped connection) must open with a
    keyword the client accepts, skip what was delivered, and a 404 then ends the follower."""
    api = _LogApi([
        ["2026-01-01T00:00:01.000000001Z one", "2026-01-01T00:00:02.000000002Z two"],
        ["2026-01-01T00:00:01.000000001Z one", "2026-01-01T00:00:02.000000002Z two",
         "2026-01-01T00:00:03.000000003Z three"],
    ])
    got: list[PodLogLine] = []
    follower = PodLogFollower(_FakeClient(api), "ns", "web-1", got.extend, max_backoff=0.05)
    follower.start()
    try:
        wait_for(lambda: not follower._thread.is_alive(), "the follower to end on 404")
    finally:
        follower.stop()
    assert [line.text for line in got] == ["one", "two", "three"]
    assert "since_seconds" in api.calls[1] and "since_time" not in api.calls[1]


def test_lines_sharing_a_timestamp_after_a_reopen_are_all_delivered() -> None:
    """A kubelet may stamp several lines alike (the emulator stamps a chunk read at once). The
    skip of a reopened stream covers only lines stamped as the last delivered one; a restarted
    container's log does not hold those, and a later pair sharing a stamp must be delivered
    whole (a rehearsal lost one such line of a restarted container: [0, 1, 2, 4])."""
    a, b, c, d = ("2026-01-01T00:00:01.5Z", "2026-01-01T00:00:05.5Z", "2026-01-01T00:00:06.5Z",
                  "2026-01-01T00:00:07.5Z")
    api = _LogApi([
        [f"{a} 0 first", f"{a} 1 first"],  # the first instance, its last line stamped a
        [f"{b} 0 second", f"{b} 1 second", f"{c} 2 second", f"{c} 3 second", f"{d} 4 second"],
    ])
    got: list[PodLogLine] = []
    follower = PodLogFollower(_FakeClient(api), "ns", "web-1", got.extend, max_backoff=0.05)
    follower.start()
    try:
        wait_for(lambda: not follower._thread.is_alive(), "the follower to end on 404")
    finally:
        follower.stop()
    assert [line.text for line in got] == ["0 first", "1 first", "0 second", "1 second", "2 second",
                                          "3 second", "4 second"]


def test_container_instance_reads_the_pod_watchs_container_state() -> None:
    def pod(*statuses: dict[str, Any]) -> dict[str, Any]:
        return {"status": {"containerStatuses": list(statuses)}}

    creating = {"name": "server", "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}
    running = {"name": "server", "restartCount": 0, "state": {"running": {}}, "containerID": "containerd://a"}
    crashed = {"name": "server", "restartCount": 2, "containerID": "containerd://c",
               "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
    assert container_instance(pod()) is None and container_instance({}) is None
    assert container_instance(pod(creating), "server") is None  # no log to read yet
    assert container_instance(pod(running), "server") == ("containerd://a", 0, True)
    assert container_instance(pod(crashed), "server") == ("containerd://c", 2, False)
    sidecar = {**running, "name": "proxy"}
    assert container_instance(pod(sidecar, crashed), "server") == ("containerd://c", 2, False)
    assert container_instance(pod(sidecar), "server") is None
    assert container_instance(pod(running)) == ("containerd://a", 0, True)  # the first by default


def test_a_follower_told_the_pod_state_opens_once_per_container_start() -> None:
    """Told by the pod watch, a follower opens nothing while the container is being created,
    one stream per container instance, and none after a stream ended with its container; a
    stream that ends while the container still runs was dropped and is reopened."""
    api = _LogApi([["2026-01-01T00:00:01Z one"], ["2026-01-01T00:00:02Z two"],
                   ["2026-01-01T00:00:03Z three"]])
    got: list[PodLogLine] = []
    follower = PodLogFollower(_FakeClient(api), "ns", "web-1", got.extend, container="server", recheck=0.2)
    follower.update(None)  # ContainerCreating
    follower.start()
    try:
        time.sleep(0.3)
        assert api.calls == []  # nothing to read yet
        follower.update(("containerd://a", 0, True))
        wait_for(lambda: [ln.text for ln in got] == ["one"], "the first instance's line")
        follower.update(("containerd://a", 0, False))  # the watch: that instance exited
        time.sleep(0.5)
        assert len(api.calls) == 1  # no reopen during the back-off
        follower.update(("containerd://b", 1, True))  # restarted
        # Issue 29 §5: the restart is marked before its first line.
        wait_for(lambda: [ln.text for ln in got] == ["one", "— restart 1 —", "two"],
                 "the second instance's line")
        # The watch still says instance b runs after its stream ended: dropped, reopened (the
        # same restart: no second marker).
        wait_for(lambda: [ln.text for ln in got] == ["one", "— restart 1 —", "two", "three"],
                 "a reopen after a drop")
    finally:
        follower.stop()
    assert [ln.restart for ln in got] == [0, 1, 1, 1]
    assert [c.get("container") for c in api.calls[:3]] == ["server"] * 3
    assert "since_seconds" in api.calls[1] and "tail_lines" not in api.calls[1]


def test_since_seconds_reaches_back_past_the_last_line_with_a_margin() -> None:
    now = 1767225600.0 + 100  # 2026-01-01T00:01:40Z
    assert since_seconds("2026-01-01T00:00:00.999Z", now) == 100 + SINCE_MARGIN_S
    assert since_seconds("2026-01-01T00:05:00Z", now) >= 1  # a node clock ahead of ours
    assert since_seconds("garbage", now) > 10**8  # unreadable: from the start



# --- the magic -------------------------------------------------------------------------------


def serve(shell: Shell, line: str, body: str = "print('hi')\n") -> None:
    shell.run_cell_magic("k8s_serve", line, body)


@pytest.mark.parametrize("name", ["__builtins__", "__name__", "class", "None", "True", "lambda"])
def test_out_refuses_keywords_and_dunders(serve_shell: Shell, name: str) -> None:
    """``--out __builtins__`` stored the handle over the notebook's builtins (every later cell
    broke); a keyword can never be used as a variable."""
    before = serve_shell.user_ns.get(name)
    with pytest.raises(UsageError, match=r"^--out "):
        serve(serve_shell, f"--dry-run --out {name}")
    with pytest.raises(UsageError, match=r"^--out "):
        serve_shell.run_cell_magic("slurm_train", f"--dry-run --out {name}", "print(1)\n")
    assert serve_shell.user_ns.get(name) is before


@pytest.mark.parametrize(("line", "option"), [
    ("--env=--", "--env"), ("-e--", "-e"), ("--out=--", "--out"), ("--patch=--", "--patch"),
    ("--profile=--", "--profile"), ("--name=--", "--name"), ("-n--", "-n"), ("--image=--", "--image"),
])
def test_a_dash_dash_value_is_a_usage_error_naming_the_option(serve_shell: Shell,
                                                               line: str, option: str) -> None:
    """argparse turns ``--opt=--`` into an empty list: an AttributeError for --env/--out/--patch,
    and --profile=-- silently used the default profile."""
    with pytest.raises(UsageError, match=rf"^{option}: '--' is not a value"):
        serve(serve_shell, f"--dry-run {line}")


@pytest.mark.parametrize("line", ["jobs --limit=--", "jobs --profile=--", "logs x --pod=--"])
def test_tiers_dash_dash_value_is_a_usage_error(serve_shell: Shell, line: str) -> None:
    with pytest.raises(UsageError, match=r"'--' is not a value"):
        serve_shell.run_line_magic("tiers", line)
    from jupyter_tiers.faces import tiers_command

    with pytest.raises(tiers_command.CommandUsage, match=r"'--' is not a value"):  # jupyter tiers
        tiers_command.run(line.split())


def test_sbatch_with_a_bare_dash_dash_is_not_glued(serve_shell: Shell) -> None:
    with pytest.raises(UsageError):
        serve_shell.run_cell_magic("slurm_train", "--profile local --dry-run --sbatch --", "print(1)\n")


# --- the patch option ------------------------------------------------------------------------


def _patched(patch: dict[str, Any]) -> list[dict[str, Any]]:
    import json

    from jupyter_tiers.core.model import ServeSpec
    from jupyter_tiers.k8s.render import render_manifests

    spec = ServeSpec("print(1)\n", name="web", image="python:3.11", env=(("TOKEN", "s3cret"),),
                     cpu="1", autoscale=(1, 2, 50), patch=json.dumps(patch))
    return render_manifests(spec, namespace="demo")


@pytest.mark.parametrize(("patch", "path"), [
    ({"Deployment": {"metadata": None}}, "metadata.name"),
    ({"Secret": {"metadata": {"labels": None}}}, "metadata.labels[app.kubernetes.io/name]"),
    ({"Secret": {"metadata": {"labels": {"app.kubernetes.io/name": "other"}}}},
     "metadata.labels[app.kubernetes.io/name]"),
    ({"ConfigMap": {"metadata": {"labels": {"app.kubernetes.io/managed-by": "me"}}}},
     "metadata.labels[app.kubernetes.io/managed-by]"),
    ({"Deployment": {"spec": {"selector": {"matchLabels": {"x": "y"}}}}}, "spec.selector"),
    ({"Deployment": {"spec": {"template": {"metadata": {"labels": None}}}}},
     "spec.template.metadata.labels[app.kubernetes.io/name]"),
    ({"Deployment": {"spec": {"template": {"metadata": {"labels": {"jupyter-tiers/color": "blue"}}}}}},
     "spec.template.metadata.labels[jupyter-tiers/color]"),
    ({"Service": {"spec": {"selector": {"app": "someone-elses"}}}}, "spec.selector"),
    ({"HorizontalPodAutoscaler": {"spec": {"scaleTargetRef": {"name": "other"}}}}, "spec.scaleTargetRef"),
])
def test_a_patch_cannot_break_what_the_tier_relies_on(patch: dict[str, Any], path: str) -> None:
    """Objects are listed and deleted by their labels: a patch that changed them left them
    behind on --delete (a Secret with the env values among them); metadata: null crashed the
    apply with a KeyError; a changed selector or HPA target pointed the service elsewhere."""
    from jupyter_tiers.core.errors import SpecError

    with pytest.raises(SpecError, match=rf"may not change {re.escape(path)} ") as info:
        _patched(patch)
    assert info.value.field == "patch"


def test_a_patch_may_add_labels_annotations_and_pod_settings() -> None:
    objects = _patched({
        "Deployment": {"metadata": {"labels": {"team": "nlp"}},
                       "spec": {"template": {"metadata": {"labels": {"team": "nlp"}},
                                             "spec": {"securityContext": {"runAsNonRoot": True}}}}},
        "Service": {"metadata": {"annotations": {"lb": "internal"}}},
    })
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    assert deployment["metadata"]["labels"]["team"] == "nlp"
    assert deployment["spec"]["template"]["spec"]["securityContext"] == {  # merged over the default
        "seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True}


# --- closing the tier ------------------------------------------------------------------------


class _BlockingStream(_Stream):
    """A log stream of a quiet pod: nothing comes until it is closed."""

    def __init__(self) -> None:
        super().__init__([])
        self.closed = threading.Event()

    def stream(self, amt: Any = None, decode_content: bool = False) -> Iterator[bytes]:
        self.closed.wait(GUARD)
        yield b""

    def close(self) -> None:
        self.closed.set()


class _QuietLogApi:
    def read_namespaced_pod_log(self, *args: Any, **kwargs: Any) -> _BlockingStream:
        return _BlockingStream()


def test_a_follower_stopped_while_its_stream_opens_ends_at_once() -> None:
    """stop() closes the stream it can see; one still opening was missed, and the follower then
    sat in it until the stream ended by itself (the idle timeout: minutes)."""
    follower: PodLogFollower

    class StopWhileOpening:
        def read_namespaced_pod_log(self, *args: Any, **kwargs: Any) -> _BlockingStream:
            follower.stop()
            return _BlockingStream()

    follower = PodLogFollower(_FakeClient(StopWhileOpening()), "demo", "web-2", lambda lines: None)
    follower.start()
    follower._thread.join(GUARD / 2)
    assert not follower._thread.is_alive()


class _StubNamespaceWatch:
    """The shared watch, without a cluster: one pod of service web."""

    namespace = "demo"

    def __init__(self) -> None:
        self.stopped = False
        self.tokens: set[int] = set()

    def subscribe(self, service: str, compute: Any, on_status: Any) -> int:
        self.tokens.add(1)
        return 1

    def add_listener(self, fn: Any) -> int:
        self.tokens.add(2)
        return 2

    def unsubscribe(self, token: int) -> None:
        self.tokens.discard(token)

    def pods(self, service: str) -> list[dict[str, Any]]:
        return [{"metadata": {"name": "web-1", "labels": {"app.kubernetes.io/name": "web"}}}]

    def stop(self) -> None:
        self.stopped = True


def _podlog_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("jt-podlog-web-1")]


def test_closing_the_tier_stops_log_followers_and_a_later_watch_starts_afresh(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """tier.close() stopped the namespace watch but left every subscription's pod log followers
    running (a widget never closed kept its threads and streams for good), and a later watch()
    subscribed to the stopped watch, which never delivers again."""
    from jupyter_tiers.config.profiles import Profile
    from jupyter_tiers.config.registry import JobRecord
    from jupyter_tiers.k8s import tier as k8s_tier

    watches: list[_StubNamespaceWatch] = []

    def new_watch(client: Any, namespace: str, **_options: Any) -> _StubNamespaceWatch:
        watches.append(_StubNamespaceWatch())
        return watches[-1]

    monkeypatch.setattr(k8s_tier, "NamespaceWatch", new_watch)
    profile = Profile(name="k", tier="kubernetes", settings={"namespace": "demo"})
    tier = k8s_tier.K8sTier(profile, client=_FakeClient(_QuietLogApi()))
    record = JobRecord(profile="k", tier="kubernetes", job_id="web", name="web", kind="service")
    tier.watch(record, on_status=lambda status: None, on_lines=lambda lines: None)
    wait_for(lambda: len(_podlog_threads()) == 1, "the pod's log follower")
    tier.close()
    wait_for(lambda: not _podlog_threads(), "the log follower to stop on close")
    assert watches[0].stopped
    sub = tier.watch(record, on_status=lambda status: None)
    assert len(watches) == 2 and not watches[1].stopped
    tier.unwatch(sub)
    assert not watches[1].tokens


# --- secrets ---------------------------------------------------------------------------------

SECRET = "hf_Zq9SECRETvalue"


def test_reprs_never_show_env_values() -> None:
    """A spec or profile printed in a notebook, a log line or a verbose traceback (IPython's
    %xmode Verbose shows locals) showed every env value."""
    from jupyter_tiers.config.profiles import Profile
    from jupyter_tiers.core.model import JobSpec, ServeSpec

    for obj in (ServeSpec("x", env=(("TOKEN", SECRET),)), JobSpec("x", env=(("TOKEN", SECRET),)),
                Profile("p", "kubernetes", env={"TOKEN": SECRET})):
        assert SECRET not in repr(obj) and SECRET not in str(obj)
    assert ServeSpec("x", env=(("A", "1"),)) != ServeSpec("x", env=(("A", "2"),))  # still compared


def test_env_errors_never_echo_a_value(serve_shell: Shell) -> None:
    from jupyter_tiers.core.errors import SpecError
    from jupyter_tiers.core.model import ServeSpec
    from jupyter_tiers.spec.options import SERVE_OPTIONS, convert_values
    from jupyter_tiers.spec.servespec import validate_serve_spec

    with pytest.raises(UsageError, match=r"^--env ") as magic_error:
        serve(serve_shell, f"--dry-run --env ={SECRET}")
    with pytest.raises(SpecError) as api_error:  # tier.make_spec(body, env=["K:VALUE"])
        convert_values({"env": [f"TOKEN:{SECRET}"]}, SERVE_OPTIONS)
    with pytest.raises(SpecError) as render_error:
        validate_serve_spec(ServeSpec("x", image="python:3", env=(("TOKEN", SECRET, "x"),)))  # type: ignore[arg-type]
    for error in (magic_error, api_error, render_error):
        assert SECRET not in str(error.value)


@pytest.mark.parametrize("word", [f"TOKEN:{SECRET}", f"TOKEN {SECRET}", SECRET + "!"])
def test_env_without_equals_that_is_no_name_is_refused_unshown(serve_shell: Shell, word: str) -> None:
    """--env HF_TOKEN:hf_... (a wrong separator) was looked up as a variable name and the error
    ('not set in the kernel's environment') repeated it, value and all."""
    with pytest.raises(UsageError, match=r"^--env entry 1: neither NAME=VALUE nor a variable NAME") as info:
        serve(serve_shell, f"--dry-run --env {shlex.quote(word)}")
    assert SECRET not in str(info.value)


@pytest.mark.parametrize("line", ["attach '\udcff'", "logs 'a\udcff'", "delete '\udcff'",
                                  "jobs --profile '\udcff'", "scale '\udcff' 1"])
def test_a_lone_surrogate_reference_is_not_found(serve_shell: Shell, line: str) -> None:
    """A lone surrogate reached sqlite, which cannot encode it: a UnicodeEncodeError traceback."""
    try:
        serve_shell.run_line_magic("tiers", line)
    except UsageError as exc:
        assert "no job" in str(exc)


def test_delete_of_a_lone_surrogate_name_is_not_found(serve_shell: Shell) -> None:
    with pytest.raises(UsageError, match="no service"):
        serve(serve_shell, "--delete --name '\udcff'")


# --- an unreachable API ----------------------------------------------------------------------


class _DownClient(KubeClient):
    """Every request fails as if the API server did not answer."""

    def __init__(self) -> None:
        super().__init__({})

    def apps(self) -> Any:
        return type("Apps", (), {"list_namespaced_deployment": None})()

    def core(self) -> Any:
        return type("Core", (), {"list_namespaced_pod": None, "list_namespaced_event": None})()

    def call(self, fn: Any, *args: Any, verb: str, resource: str, namespace: str | None = None,
             **kwargs: Any) -> Any:
        from jupyter_tiers.core.errors import ApiUnreachable

        raise ApiUnreachable("Kubernetes API at http://127.0.0.1:1 did not answer: refused")


def test_watching_with_the_api_down_answers_at_once_with_an_unknown_state() -> None:
    """subscribe() waited for each kind to list, 30 s per kind, before delivering anything:
    opening a ServeView or wait_ready() froze the kernel for 90 s. And the first status (no
    Deployment seen) said DELETED, which ends every view of the service for good."""
    from jupyter_tiers.core.model import ServiceState, ServiceStatus
    from jupyter_tiers.k8s.parse import service_status
    from jupyter_tiers.k8s.watch import NamespaceWatch

    nsw = NamespaceWatch(_DownClient(), "demo")
    got: list[ServiceStatus] = []
    start = time.monotonic()
    try:
        nsw.subscribe("web", lambda w: service_status("web", None, [], [], endpoint=None, now=0.0),
                      got.append)
        assert time.monotonic() - start < GUARD / 2
        assert got and got[-1].state is ServiceState.UNKNOWN and not got[-1].api_reachable
        assert "did not answer" in got[-1].message
    finally:
        nsw.stop()
