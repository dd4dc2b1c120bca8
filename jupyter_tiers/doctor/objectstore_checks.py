"""Pure judgement of a profile's ``object_store`` (:mod:`.objectstore_probe`): where the check
ran and with which credentials, the endpoint, the bucket, and a test object written, read back
and deleted; on Kubernetes, the ``credentials_secret``. Every FAIL says what to do; no line
ever holds a credential (the probe never sees one it would print, and output is parsed, not
echoed)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..data.objectstore import ObjectStore
from .model import Check, fail, ok, skip, warn

MARK = "@@jt-s3check"
NAMES = ("s3 client", "s3 credentials", "s3 endpoint", "s3 bucket", "s3 write/read/delete")
CREDENTIAL_CODES = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken",
                    "InvalidClientTokenId", "TokenRefreshRequired", "AuthorizationHeaderMalformed")
DENIED_CODES = ("AccessDenied", "403", "Forbidden", "AllAccessDisabled")
MISSING_CODES = ("NoSuchBucket", "404")


@dataclass(frozen=True)
class Step:
    """One ``@@jt-s3check`` line of the check program (doctor/s3_check_script.py)."""

    step: str
    ok: bool
    detail: str = ""
    code: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class S3Probe:
    """What running the check found. ``where``: "the login node" / "this machine"; ``mode``:
    cluster | kernel; ``error``: why it did not run (no login, no python, kernel credentials
    missing); ``output``: the program's output."""

    where: str
    mode: str
    output: str = ""
    error: str = ""


def _text(value: Any, limit: int = 300) -> str:
    return str(value)[:limit] if isinstance(value, (str, int, float)) else ""


def parse_steps(output: str) -> list[Step]:
    """The program's step lines; anything else in ``output`` is ignored (never raises)."""
    steps: list[Step] = []
    for line in output.splitlines():
        if not line.startswith(MARK + " "):
            continue
        try:
            data = json.loads(line[len(MARK) + 1:])
        except (ValueError, RecursionError):
            continue
        if not isinstance(data, dict) or not isinstance(data.get("step"), str):
            continue
        extra = {k: _text(v) for k, v in data.items() if k in ("host", "python", "key")}
        steps.append(Step(_text(data["step"], 40), data.get("ok") is True, _text(data.get("detail")),
                          _text(data.get("code"), 60), extra))
    return steps


def _where(store: ObjectStore) -> str:
    return store.endpoint_url or (f"AWS S3 ({store.region})" if store.region else "AWS S3")


def mode_text(mode: str, where: str) -> str:
    """How the profile's uploads get their credentials, in words."""
    if mode == "kernel":
        return ("kernel: this notebook's AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, sent on stdin "
                "with each upload (never written to a file)")
    env = "its login shell's environment" if where == "the login node" else "the environment"
    return f"cluster: boto3's own chain on {where} (~/.aws/credentials, AWS_* in {env}, or an instance role)"


def _credentials_where(probe: S3Probe) -> str:
    if probe.mode == "kernel":
        return ("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary "
                "ones) in the environment Jupyter starts the kernel with")
    return (f"~/.aws/credentials on {probe.where}, or AWS_* in its login shell's environment (or set "
            "object_store.credentials: kernel)")


def _bucket_fail(step: Step, store: ObjectStore, probe: S3Probe) -> Check:
    where = _where(store)
    if step.code in MISSING_CODES:
        url = f" --endpoint-url {store.endpoint_url}" if store.endpoint_url else ""
        return fail("s3 bucket", f"bucket {store.bucket} does not exist at {where}",
                    f"create it (aws s3 mb s3://{store.bucket}{url}) or correct object_store.bucket",
                    code=step.code)
    if step.code in CREDENTIAL_CODES:
        return fail("s3 bucket", f"{where} refused the credentials ({probe.mode}): {step.code}",
                    f"fix the credentials the uploads use: {_credentials_where(probe)}", code=step.code)
    if step.code in DENIED_CODES:
        return fail("s3 bucket", f"access to bucket {store.bucket} denied ({step.code}) with the "
                    f"{probe.mode} credentials", f"ask for s3:ListBucket, s3:GetObject and "
                    f"s3:PutObject on {store.bucket}, or use credentials that have them", code=step.code)
    return fail("s3 bucket", f"{store.bucket} at {where}: {step.code} {step.detail}".strip(),
                "check object_store's endpoint_url, region and bucket", code=step.code)


def _object_check(step: Step, store: ObjectStore) -> Check:
    key = step.data.get("key", "")
    if step.ok:
        return ok("s3 write/read/delete", f"a test object under s3://{store.bucket}/"
                  f"{store.prefix + '/' if store.prefix else ''} was written, read back and deleted")
    if step.step == "delete":
        return warn("s3 write/read/delete", f"written and read back, but deleting it failed "
                    f"({step.code}): s3://{store.bucket}/{key} is left",
                    f"remove it by hand (aws s3 rm s3://{store.bucket}/{key}); uploads do not delete, "
                    "so they are not affected", code=step.code)
    what = {"write": "s3:PutObject", "read": "s3:GetObject"}.get(step.step, "access")
    return fail("s3 write/read/delete", f"{step.step} of a test object failed: {step.code} {step.detail}"
                .strip(), f"uploads need {what} on s3://{store.bucket}/{store.prefix}: ask for it, or "
                "use credentials that have it", code=step.code)


def store_checks(probe: S3Probe, store: ObjectStore) -> list[Check]:
    """The object-store lines of a Slurm or local profile, in order; the stages after a failed
    one are SKIP."""
    checks: list[Check] = []
    if probe.error:
        not_run = [skip(n, "the check did not run") for n in NAMES[2:]]
        if probe.mode == "kernel" and "environment" in probe.error:
            return [fail("s3 credentials", probe.error, "set them in the environment Jupyter starts the "
                         "kernel with (not in the notebook), or set object_store.credentials: cluster"),
                    *not_run]
        return [fail("s3 client", probe.error, "see the login lines above; the object store is checked "
                     "from there"), *not_run]
    steps = {s.step: s for s in parse_steps(probe.output)}
    client = steps.get("boto3")
    if client is None:
        last = next((ln.strip() for ln in reversed(probe.output.splitlines()) if ln.strip()), "")
        said = last.removeprefix("@@jt-upload error ")[:200] or "no output"
        return [fail("s3 client", f"the check did not run on {probe.where}: {said}",
                     "set defaults.python to an interpreter there that has boto3"),
                *[skip(n, "the check did not run") for n in NAMES[1:]]]
    host = client.data.get("host", "")
    on = f"{probe.where} ({host})" if host else probe.where
    if not client.ok:
        python = client.data.get("python", "python")
        return [fail("s3 client", client.detail, f"install it there ({python} -m pip install boto3) or "
                     "set defaults.python to one that has it"),
                *[skip(n, "no S3 client") for n in NAMES[1:]]]
    checks.append(ok("s3 client", client.detail))
    creds = steps.get("credentials")
    if creds is None or not creds.ok:
        checks.append(fail("s3 credentials", f"no credentials found on {on}; uploads use "
                           f"{mode_text(probe.mode, probe.where)}",
                           f"give the uploads credentials: {_credentials_where(probe)}"))
        return [*checks, *[skip(n, "no credentials") for n in NAMES[2:]]]
    checks.append(ok("s3 credentials", f"{mode_text(probe.mode, probe.where)}; on {on} boto3 found them "
                     f"({creds.detail})", method=creds.detail))
    endpoint = steps.get("endpoint")
    if endpoint is not None and not endpoint.ok:
        checks.append(fail("s3 endpoint", f"{store.endpoint_url} not reachable from {on}: "
                           f"{endpoint.detail}", "check object_store.endpoint_url and that "
                           f"{probe.where} can reach it (a proxy? a firewall?)"))
        return [*checks, *[skip(n, "the endpoint did not answer") for n in NAMES[3:]]]
    checks.append(ok("s3 endpoint", f"{endpoint.detail} from {on}" if endpoint else
                     f"{_where(store)} (boto3's default endpoint)"))
    bucket = steps.get("bucket")
    if bucket is None:
        failed = steps.get("request")
        checks.append(fail("s3 bucket", f"the check stopped: {failed.detail if failed else 'no answer'}",
                           "run the doctor again; if it persists, report it with this line"))
        return [*checks, skip(NAMES[4], "the bucket was not checked")]
    if not bucket.ok:
        return [*checks, _bucket_fail(bucket, store, probe), skip(NAMES[4], "the bucket is not usable")]
    checks.append(ok("s3 bucket", f"{store.bucket} at {_where(store)} answers"))
    done = steps.get("write read delete") or next(
        (s for name, s in steps.items() if name in ("write", "read", "delete")), None)
    if done is None:
        checks.append(fail("s3 write/read/delete", "the check ended before the test object",
                           "run the doctor again; if it persists, report it with this line"))
    else:
        checks.append(_object_check(done, store))
    return checks


def secret_check(store: ObjectStore, namespace: str, status: int, error: str = "") -> list[Check]:
    """A Kubernetes profile's ``credentials_secret`` (its existence only, never its values) and
    where the bucket is reached from (the pods, not this machine)."""
    pods = ok("s3 credentials", f"the model-fetch init container reaches {_where(store)} from the "
              "pods" + (f" with the Secret {store.credentials_secret}'s AWS_* keys" if
                        store.credentials_secret else " with no credentials (a public bucket, or "
                        "the nodes' own role)"))
    if not store.credentials_secret:
        return [pods]
    name = store.credentials_secret
    if status == 200:
        return [pods, ok("s3 secret", f"{name} exists in {namespace} (its values were not read)")]
    if status == 404:
        return [pods, fail("s3 secret", f"{name} does not exist in {namespace}",
                           f"create it: kubectl -n {namespace} create secret generic {name} "
                           "--from-literal=AWS_ACCESS_KEY_ID=... --from-literal=AWS_SECRET_ACCESS_KEY=... "
                           "(or correct object_store.credentials_secret)")]
    if status == 403:
        return [pods, warn("s3 secret", f"{name}: you may not read Secrets in {namespace}, so its "
                           "existence is not checked")]
    return [pods, warn("s3 secret", f"{name}: not checked ({error or f'HTTP {status}'})")]
