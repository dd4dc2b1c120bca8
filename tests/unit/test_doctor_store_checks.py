"""The doctor's object-store judgement (pure): the check program's lines become one line per
stage, a failed stage's successors SKIP, every FAIL has a fix; a Kubernetes profile's Secret by
its status only. Seeded fuzz of the program's output."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from jupyter_tiers.data.objectstore import parse_object_store
from jupyter_tiers.doctor.model import Status
from jupyter_tiers.doctor.objectstore_checks import (
    MARK,
    NAMES,
    S3Probe,
    parse_steps,
    secret_check,
    store_checks,
)

STORE = parse_object_store({"bucket": "jt-ckpt", "endpoint_url": "http://s3.lab:9000",
                            "allow_insecure_endpoint": True, "prefix": "a/b"}, "slurm")


def _line(step: str, ok: bool, detail: str = "", code: str = "", **data: str) -> str:
    return f"{MARK} " + json.dumps({"step": step, "ok": ok, "detail": detail, "code": code, **data})


def _statuses(output: str, mode: str = "cluster") -> dict[str, Status]:
    return {c.name: c.status for c in store_checks(S3Probe("the login node", mode, output), STORE)}


def test_every_stage_in_order() -> None:
    good = [_line("boto3", True, "boto3 1.34", host="login1"),
            _line("credentials", True, "shared-credentials-file"),
            _line("endpoint", True, "s3.lab:9000 answers"), _line("bucket", True, "jt-ckpt"),
            _line("write read delete", True, "a/b/.jt-doctor-1")]
    checks = store_checks(S3Probe("the login node", "cluster", "noise\n" + "\n".join(good)), STORE)
    assert [c.name for c in checks] == list(NAMES) and all(c.status is Status.OK for c in checks)
    assert "on the login node (login1) boto3 found them (shared-credentials-file)" in checks[1].detail
    denied = [*good[:3], _line("bucket", False, "Forbidden", "AccessDenied")]
    assert _statuses("\n".join(denied)) == {**dict.fromkeys(NAMES[:3], Status.OK), "s3 bucket": Status.FAIL,
                                            "s3 write/read/delete": Status.SKIP}
    wrong = store_checks(S3Probe("the login node", "cluster", "\n".join(
        [*good[:3], _line("bucket", False, "x", "SignatureDoesNotMatch")])), STORE)[3]
    assert "refused the credentials (cluster)" in wrong.detail
    assert "~/.aws/credentials on the login node" in wrong.fix
    no_delete = [*good[:4], _line("delete", False, "denied", "AccessDenied", key="a/b/.jt-doctor-1")]
    last = store_checks(S3Probe("the login node", "cluster", "\n".join(no_delete)), STORE)[-1]
    assert last.status is Status.WARN and "s3://jt-ckpt/a/b/.jt-doctor-1 is left" in last.detail
    no_python = store_checks(S3Probe("the login node", "cluster",
                                     "@@jt-upload error python python3 not found on login1"), STORE)
    assert no_python[0].status is Status.FAIL and "python python3 not found on login1" in no_python[0].detail


def test_the_kubernetes_secret_by_status_only() -> None:
    store = parse_object_store({"bucket": "jt-ckpt", "credentials_secret": "s3-creds"}, "kubernetes")
    assert [c.status for c in secret_check(store, "ml", 200)] == [Status.OK, Status.OK]
    missing = secret_check(store, "ml", 404)[1]
    assert missing.status is Status.FAIL and "kubectl -n ml create secret generic s3-creds" in missing.fix
    assert secret_check(store, "ml", 403)[1].status is Status.WARN
    public = parse_object_store({"bucket": "jt-ckpt"}, "kubernetes")
    assert [c.name for c in secret_check(public, "ml", 0)] == ["s3 credentials"]


def test_fuzz_any_output_gives_checks_never_an_exception() -> None:
    rng = random.Random(20261203)
    steps = ["boto3", "credentials", "endpoint", "bucket", "write", "read", "delete", "write read delete",
             "request", "", "x" * 80]
    for _ in range(2000):
        lines = []
        for _ in range(rng.randint(0, 7)):
            pick = rng.random()
            if pick < 0.6:
                codes = ["", "404", "NoSuchBucket", "AccessDenied", "InvalidAccessKeyId"]
                lines.append(_line(rng.choice(steps), rng.random() < 0.7, rng.choice(["", "d", "\x1b[2J"]),
                                   rng.choice(codes),
                                   **({"host": "h"} if rng.random() < 0.5 else {})))
            elif pick < 0.8:
                junk = "".join(rng.choice('{}[]":,1a ') for _ in range(rng.randint(0, 30)))
                lines.append(f"{MARK} {junk}")
            else:
                lines.append("".join(rng.choice("ab @\t\x00é") for _ in range(rng.randint(0, 20))))
        output = "\n".join(lines)
        parse_steps(output)
        checks = store_checks(S3Probe(rng.choice(["the login node", "this machine"]),
                                      rng.choice(["cluster", "kernel"]), output), STORE)
        assert checks and all(c.name.startswith("s3 ") for c in checks)
        assert len({c.name for c in checks}) == len(checks)


def test_a_slurm_profiles_store_is_not_checked_when_the_login_node_was_not_reached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/config of this machine's user

    from jupyter_tiers.config.profiles import Profile
    from jupyter_tiers.doctor import check_profile

    with socket.socket() as sock:  # a loopback port nothing listens on (bound, never listening)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        profile = Profile("far", "slurm", {"host": "127.0.0.1", "port": port, "connect_timeout": 5,
                                           "object_store": {"bucket": "jt-ckpt"}})
        report = check_profile(profile)
    checks = {c.name: c for c in report.checks}
    assert checks["tcp"].status is Status.FAIL
    assert checks["object store"].status is Status.SKIP and "not reached" in checks["object store"].detail
