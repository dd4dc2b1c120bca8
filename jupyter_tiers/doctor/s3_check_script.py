"""The doctor's object-store check: the program run where a profile's uploads run (``python -c``
with this file's text on a Slurm login node, or on this machine for the local tier).

Standalone on purpose, like s3_upload.py: the standard library and boto3 only. One JSON request
on stdin (the kernel's credentials, when the profile says ``kernel``, travel only there). It
says where boto3 found credentials (never a value), reaches the endpoint, asks for the bucket,
then writes, reads back and deletes one small test object (deleted at once, also after a
failure). Output: one ``@@jt-s3check {json}`` line per step (objectstore_checks reads them).
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import uuid
from typing import Any
from urllib.parse import urlsplit

MARK = "@@jt-s3check"


def say(step: str, ok: bool, detail: str = "", code: str = "", **data: Any) -> None:
    line = json.dumps({"step": step, "ok": ok, "detail": detail[:300], "code": code[:60], **data})
    sys.stdout.write(f"{MARK} {line}\n")
    sys.stdout.flush()


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", "") or "")
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code or (str(status) if status else type(exc).__name__)


def check(req: dict[str, Any]) -> None:
    host = socket.gethostname()
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        say("boto3", False, f"boto3 is not installed for {sys.executable} on {host}", "NoBoto3",
            python=sys.executable, host=host)
        return
    say("boto3", True, f"boto3 {boto3.__version__} for {sys.executable} on {host}", host=host)
    creds = req.get("credentials") or {}
    session = boto3.session.Session(
        aws_access_key_id=creds.get("AWS_ACCESS_KEY_ID"),
        aws_secret_access_key=creds.get("AWS_SECRET_ACCESS_KEY"),
        aws_session_token=creds.get("AWS_SESSION_TOKEN"),
        region_name=req.get("region"))
    found = session.get_credentials()
    if found is None:
        say("credentials", False, f"no AWS credentials on {host}", "NoCredentials", host=host)
        return
    # Where boto3 found them ("env", "shared-credentials-file", "iam-role", "explicit", ...).
    say("credentials", True, str(getattr(found, "method", "") or "found"), host=host)
    endpoint = req.get("endpoint_url")
    if endpoint:
        parts = urlsplit(endpoint)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            socket.create_connection((parts.hostname or "", port), timeout=10).close()
        except OSError as exc:
            say("endpoint", False, f"{parts.hostname}:{port}: {exc.strerror or exc}", "Unreachable",
                host=host)
            return
        say("endpoint", True, f"{parts.hostname}:{port} answers", host=host)
    config = Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=10, read_timeout=30)
    client = session.client("s3", endpoint_url=endpoint, config=config)
    bucket = req["bucket"]
    try:
        client.head_bucket(Bucket=bucket)
    except Exception as exc:
        code = _code(exc)
        if code in ("400", "403"):  # a HEAD answer has no body: ask again for the reason
            try:
                client.list_objects_v2(Bucket=bucket, MaxKeys=1)
            except Exception as again:
                exc, code = again, _code(again)
        say("bucket", False, str(exc)[:200], code)
        return
    say("bucket", True, bucket)
    prefix = str(req.get("prefix") or "")
    key = f"{prefix + '/' if prefix else ''}.jt-doctor-{uuid.uuid4().hex[:12]}"
    body = b"jupyter-tiers doctor test object; deleted at once\n"
    step = "write"
    try:
        client.put_object(Bucket=bucket, Key=key, Body=body)
        step = "read"
        got = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        if got != body:
            say("read", False, "the object read back differs from what was written", "Mismatch")
            return
        step = "delete"
        client.delete_object(Bucket=bucket, Key=key)
        say("write read delete", True, key)
    except Exception as exc:
        say(step, False, str(exc)[:200], _code(exc), key=key)
    finally:
        if step != "delete":
            # Nothing may have been written; a failure here was said above.
            with contextlib.suppress(Exception):
                client.delete_object(Bucket=bucket, Key=key)


def main() -> int:
    try:
        req = json.loads(sys.stdin.readline())
    except ValueError:
        say("request", False, "the request on stdin is not JSON", "BadRequest")
        return 2
    try:
        check(req)
    except Exception as exc:
        say("request", False, f"{type(exc).__name__}: {str(exc)[:200]}", type(exc).__name__)
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
