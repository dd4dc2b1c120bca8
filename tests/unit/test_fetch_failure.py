"""The fetch-model init container's failure as one line (pure): the end of its log (its
termination message under FallbackToLogsOnError) as botocore and the AWS CLI write it, read
against the pod's spec for the URI and the credentials Secret; the pod row and the summary carry
it; a seeded fuzz of the reader."""

from __future__ import annotations

import random
from typing import Any

from botocore.exceptions import ClientError

from jupyter_tiers.core.model import ServeSpec
from jupyter_tiers.data.objectstore import parse_object_store
from jupyter_tiers.k8s.fetch import add_model_fetch, fetch_failure
from jupyter_tiers.k8s.parse import pod_info
from jupyter_tiers.k8s.render import render_manifests
from jupyter_tiers.serving.status import describe_pod_problem

URI = "s3://team-ckpt/jt/x/model.bin"
STORE = parse_object_store({"endpoint_url": "http://10.0.0.1:9000", "allow_insecure_endpoint": True,
                            "bucket": "team-ckpt",
                            "credentials_secret": "s3-creds"}, "kubernetes")
SEED = 16002


def spec_with_fetch(store: Any = STORE, uri: str = URI) -> dict[str, Any]:
    spec = ServeSpec(body="print(1)", name="m", image="python:3.11-slim", model_path="/models/model.bin")
    objects = add_model_fetch(render_manifests(spec, namespace="ns"), uri, store, None)
    (dep,) = [o for o in objects if o["kind"] == "Deployment"]
    return dep["spec"]["template"]["spec"]


def cli_error(code: str, operation: str, message: str, status: int) -> str:
    """What ``aws s3 cp`` prints for a ClientError: ``fatal error: `` and botocore's own text."""
    exc = ClientError({"Error": {"Code": code, "Message": message},
                       "ResponseMetadata": {"HTTPStatusCode": status}}, operation)
    return f"download failed\nfatal error: {exc}\n"


def test_the_init_container_puts_its_log_into_its_termination_message() -> None:
    (init,) = spec_with_fetch()["initContainers"]
    assert init["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_each_object_store_error_is_one_line_naming_the_uri_and_what_to_check() -> None:
    pod = spec_with_fetch()
    head = f"init container fetch-model: {URI}: "
    assert fetch_failure(cli_error("403", "HeadObject", "Forbidden", 403), pod) == (
        head + "403 Forbidden — check the Secret s3-creds (its credentials lack access to bucket team-ckpt)")
    assert fetch_failure(cli_error("AccessDenied", "ListObjectsV2", "Access Denied", 403), pod).startswith(
        head + "403 Forbidden — check the Secret s3-creds")
    assert fetch_failure(cli_error("404", "HeadObject", "Not Found", 404), pod) == (
        head + "404 Not Found — no such key in bucket team-ckpt (or no such bucket)")
    assert fetch_failure(cli_error("NoSuchBucket", "ListObjectsV2", "The specified bucket does not exist",
                                   404), pod) == head + "bucket team-ckpt does not exist at http://10.0.0.1:9000"
    assert fetch_failure(cli_error("InvalidAccessKeyId", "HeadObject", "The AWS Access Key Id you provided "
                                   "does not exist in our records.", 403), pod) == (
        head + "the object store refused the credentials (InvalidAccessKeyId) — check the Secret s3-creds")
    assert fetch_failure("fatal error: Unable to locate credentials\n", pod) == (
        head + "no credentials in the pod — check the Secret s3-creds")
    assert fetch_failure('fatal error: Could not connect to the endpoint URL: "http://10.0.0.1:9000/..."',
                         pod) == head + "cannot reach http://10.0.0.1:9000 from the pod"
    assert fetch_failure("line one\nsomething else broke\n\n", pod, 2) == (
        head + "exit 2: something else broke")
    assert fetch_failure(None, pod, 1) == head + "exit 1"
    nosecret = spec_with_fetch(parse_object_store({"bucket": "team-ckpt"}, "kubernetes"))
    assert fetch_failure(cli_error("403", "HeadObject", "Forbidden", 403), nosecret).endswith(
        "403 Forbidden — the profile's object_store has no credentials_secret (its credentials lack "
        "access to bucket team-ckpt)")


def pod(spec: dict[str, Any], init_status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "m-abc-1", "uid": "u"}, "spec": spec,
            "status": {"phase": "Pending", "initContainerStatuses": [init_status],
                       "containerStatuses": [{"name": "server", "restartCount": 0,
                                              "state": {"waiting": {"reason": "PodInitializing"}}}]}}


def test_the_pod_row_and_the_summary_say_it_in_the_back_off_and_the_first_time() -> None:
    spec = spec_with_fetch()
    term = {"exitCode": 1, "reason": "Error", "message": cli_error("403", "HeadObject", "Forbidden", 403)}
    looping = pod_info(pod(spec, {"name": "fetch-model", "restartCount": 2,
                                  "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
                                  "lastState": {"terminated": term}}))
    line = f"init container fetch-model: {URI}: 403 Forbidden — check the Secret s3-creds"
    assert looping.reason == "CrashLoopBackOff" and looping.message is not None
    assert looping.message.startswith(line)
    assert describe_pod_problem(looping).startswith(
        f"pod m-abc-1 CrashLoopBackOff (exit 1, 2 restarts): {line}")
    first = pod_info(pod(spec, {"name": "fetch-model", "restartCount": 0, "state": {"terminated": term}}))
    assert first.reason == "Error" and first.message is not None and first.message.startswith(line)
    # A main container's crash loop is as before: no words from the fetch reader.
    other = pod_info(pod(spec, {"name": "other", "restartCount": 2, "state": {"terminated": term}}))
    assert other.message is None or not other.message.startswith("init container")


def _junk(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.randrange(7 if depth < 3 else 4)
    if pick == 0:
        return rng.choice([None, 1, True, "", "fetch-model", "s3://b/k", "--endpoint-url",
                           "AWS_ACCESS_KEY_ID"])
    if pick == 1:
        return "".join(rng.choice("ab3()/: \n\x00é") for _ in range(rng.randrange(12)))
    if pick == 2:
        return cli_error(rng.choice(["403", "404", "NoSuchBucket", "Weird", "x" * 70]), "HeadObject",
                         rng.choice(["", "Forbidden", "a\nb"]), 403)
    if pick == 3:
        return rng.randrange(-5, 300)
    if pick == 4:
        return [_junk(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = ["name", "command", "env", "valueFrom", "secretKeyRef", "initContainers", "message"]
    return {rng.choice(keys): _junk(rng, depth + 1) for _ in range(rng.randrange(5))}


def test_fuzz_fetch_failure_is_always_one_bounded_line() -> None:
    rng = random.Random(SEED)
    real = spec_with_fetch()
    for _ in range(4000):
        spec = real if rng.random() < 0.3 else _junk(rng)
        if not isinstance(spec, dict):
            spec = {"initContainers": spec}
        message = _junk(rng)
        line = fetch_failure(message if isinstance(message, str) else None, spec, rng.choice([None, 1, 137]))
        assert line.startswith("init container fetch-model: ") and "\n" not in line and len(line) <= 400
        pod_info(pod(spec, {"name": "fetch-model", "restartCount": rng.randrange(3),
                            "state": {"terminated": {"exitCode": 1, "message": message}}}))
