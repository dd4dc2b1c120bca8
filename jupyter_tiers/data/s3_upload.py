"""Upload one checkpoint (a file or a directory) to S3: the program jupyter-tiers runs on a Slurm
login node (``python -c`` with this file's text) or on this machine for the local tier.

Standalone on purpose: the standard library and boto3 only (nothing from jupyter_tiers), since
it runs with the cluster's python. One JSON request arrives on stdin (credentials, when the
profile says ``kernel``, travel only there: never in argv, the environment of another process or
a file). Output: ``@@jt-upload`` lines (objectstore.parse_upload_output reads them).

Resumable at part granularity: a state file (0600, in the job directory) records each file's
size, mtime and sha256, the multipart upload id, and every part the server confirmed. A re-run
asks the server which parts it holds (ListParts) and sends only the others; a file already
complete (same size, mtime and sha256) is not sent at all; the manifest goes last. A lock on the
state file keeps two runs (an SSH cut leaves the old one running for a moment) from racing.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

MARK = "@@jt-upload"
FORMAT = "jupyter-tiers/checkpoint-manifest/1"  # objectstore.MANIFEST_FORMAT
_out_lock = threading.Lock()


def say(*words: object) -> None:
    line = " ".join(str(w).replace("\n", " ") for w in words)
    with _out_lock:
        sys.stdout.write(f"{MARK} {line}\n")
        sys.stdout.flush()


class Refused(Exception):
    """One line for the user; the upload stops."""


def _inside(path: str, top: str) -> bool:
    real = os.path.realpath(path)
    return real.startswith(top.rstrip("/") + "/")


def _files(source: str) -> tuple[str, list[tuple[str, str, int, float]]]:
    """(kind, [(relative path, absolute path, size, mtime)]) of the checkpoint, sorted. A
    symbolic link inside a directory checkpoint is sent as a copy only when it resolves to a
    file inside the checkpoint; one pointing elsewhere (``~/.ssh/id_rsa``) is skipped."""
    if os.path.islink(source):
        raise Refused(f"checkpoint {source} is a symbolic link; only a real file or directory is "
                      "uploaded")
    if os.path.isfile(source):
        st = os.stat(source)
        return "file", [("", source, st.st_size, st.st_mtime)]
    if not os.path.isdir(source):
        raise Refused(f"checkpoint {source} does not exist on {socket.gethostname()}")
    top = os.path.realpath(source)
    out = []
    for root, dirs, names in os.walk(source):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            if os.path.islink(path) and not (os.path.isfile(path) and _inside(path, top)):
                continue
            if not os.path.islink(path) and not os.path.isfile(path):
                continue  # a FIFO, socket or device: not a checkpoint's file
            st = os.stat(path)
            out.append((os.path.relpath(path, source).replace(os.sep, "/"), path, st.st_size, st.st_mtime))
    if not out:
        raise Refused(f"checkpoint directory {source} holds no files")
    return "dir", sorted(out)


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


class State:
    """The resumable record, saved atomically after every confirmed part."""

    def __init__(self, path: str, dest: str) -> None:
        self.path, self.lock = path, threading.Lock()
        self.data: dict[str, Any] = {"dest": dest, "files": {}}
        try:
            with open(path) as f:
                old = json.load(f)
            if isinstance(old, dict) and old.get("dest") == dest and isinstance(old.get("files"), dict):
                self.data = old
        except (OSError, ValueError):
            pass

    def file(self, rel: str) -> dict[str, Any]:
        files: dict[str, Any] = self.data["files"]
        return files.setdefault(rel, {})

    def save(self) -> None:
        tmp = f"{self.path}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(self.data, f)
        os.replace(tmp, self.path)


def _client(req: dict[str, Any]) -> Any:
    import boto3
    from botocore.config import Config

    creds = req.get("credentials") or {}
    session = boto3.session.Session(
        aws_access_key_id=creds.get("AWS_ACCESS_KEY_ID"),
        aws_secret_access_key=creds.get("AWS_SECRET_ACCESS_KEY"),
        aws_session_token=creds.get("AWS_SESSION_TOKEN"),
        region_name=req.get("region"),
    )
    config = Config(retries={"max_attempts": 4, "mode": "standard"}, connect_timeout=15, read_timeout=120)
    return session.client("s3", endpoint_url=req.get("endpoint_url"), config=config)


def _explain(exc: Exception, req: dict[str, Any]) -> str:
    """A boto error -> one line naming the bucket and what is wrong."""
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

    bucket, where = req["bucket"], req.get("endpoint_url") or "AWS S3"
    host = socket.gethostname()
    if isinstance(exc, NoCredentialsError):
        return (f"no AWS credentials on {host} (~/.aws/credentials, AWS_* environment or an instance "
                "role); set them there or use object_store credentials: kernel")
    if isinstance(exc, EndpointConnectionError):
        return f"cannot reach {where} from {host}"
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code = str(err.get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in ("NoSuchBucket", "404") and exc.operation_name in ("HeadBucket", "CreateMultipartUpload",
                                                                       "PutObject"):
            return f"bucket {bucket} does not exist at {where}"
        if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken"):
            return f"{where} refused the credentials ({req.get('mode', 'cluster')}): {code}"
        if code in ("AccessDenied", "403", "Forbidden") or status == 403:
            return (f"access to bucket {bucket} denied: the credentials ({req.get('mode', 'cluster')}) "
                    "lack access to it")
        return f"{exc.operation_name} on bucket {bucket}: {code or status} {err.get('Message', '')}".strip()
    return f"{type(exc).__name__}: {exc}"


def _upload_file(client: Any, req: dict[str, Any], state: State, rel: str, path: str, size: int,
                 key: str, progress: Any) -> int:
    """Send one file (multipart above the threshold); returns the bytes sent in this run."""
    bucket, part_size = req["bucket"], int(req["part_size"])
    # S3 takes at most 10,000 parts: a bigger file gets bigger parts (whole MiB).
    part_size = max(part_size, -(-size // (10_000 << 20)) << 20)
    rec = state.file(rel)
    if size < int(req["threshold"]) or size <= part_size:
        with open(path, "rb") as f:
            client.put_object(Bucket=bucket, Key=key, Body=f)
        progress(size)
        return size
    held: dict[int, str] = {}
    upload_id = rec.get("upload_id")
    if upload_id:
        try:
            paginator = client.get_paginator("list_parts")
            for page in paginator.paginate(Bucket=bucket, Key=key, UploadId=upload_id):
                for part in page.get("Parts", []):
                    number = int(part["PartNumber"])
                    expected = min(part_size, size - (number - 1) * part_size)
                    if int(part["Size"]) == expected:
                        held[number] = part["ETag"]
        except Exception as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code")
            if code not in ("NoSuchUpload", "404"):
                raise
            upload_id = None
    if not upload_id:
        upload_id = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        held = {}
        with state.lock:
            rec["upload_id"], rec["parts"] = upload_id, {}
            state.save()
    count = (size + part_size - 1) // part_size
    progress(sum(min(part_size, size - (n - 1) * part_size) for n in held))
    sent = [0]

    def send(number: int) -> None:
        with open(path, "rb") as f:
            f.seek((number - 1) * part_size)
            data = f.read(part_size)
        etag = client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number,
                                  Body=data)["ETag"]
        with state.lock:
            held[number] = etag
            rec.setdefault("parts", {})[str(number)] = etag
            sent[0] += len(data)
            state.save()
        progress(len(data))

    todo = [n for n in range(1, count + 1) if n not in held]
    with ThreadPoolExecutor(max_workers=max(1, int(req.get("concurrency", 4)))) as pool:
        for future in [pool.submit(send, n) for n in todo]:
            future.result()
    client.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": held[n]} for n in range(1, count + 1)]})
    return sent[0]


def upload(req: dict[str, Any]) -> None:
    import fcntl

    try:
        import boto3  # noqa: F401
    except ImportError:
        raise Refused(f"boto3 is not installed for {sys.executable} on {socket.gethostname()}; "
                      f"install it there ({sys.executable} -m pip install boto3) or set the "
                      "profile's python to one that has it") from None
    source = os.path.expanduser(req["source"])
    kind, files = _files(source)
    if kind != req.get("kind", kind):
        raise Refused(f"checkpoint {source} is a {kind}, not a {req['kind']}")
    lock = open(req["state"] + ".lock", "a")  # noqa: SIM115 - held until the process ends
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        say("busy", "another upload of this checkpoint is running")
        return
    state = State(req["state"], req["uri"])
    client = _client(req)
    client.head_bucket(Bucket=req["bucket"])
    total = sum(size for _, _, size, _ in files)
    done = [0]

    def progress(n: int) -> None:
        with state.lock:
            done[0] += n
            now = done[0]
        say("progress", now, total)

    sent = 0
    entries = []
    say("progress", 0, total)
    for rel, path, size, mtime in files:
        rec = state.file(rel)
        if not (rec.get("size") == size and rec.get("mtime") == mtime and rec.get("sha256")):
            rec.clear()
            rec.update(size=size, mtime=mtime, sha256=_sha256(path))
            state.save()
        entries.append({"path": rel, "size": size, "sha256": rec["sha256"]})
        key = f"{req['key']}/{rel}" if rel else req["key"]
        if rec.get("done"):
            progress(size)
            continue
        sent += _upload_file(client, req, state, rel, path, size, key, progress)
        with state.lock:
            rec["done"] = True
            rec.pop("parts", None)
            state.save()
    uri = req["uri"] + ("/" if kind == "dir" else "")  # a directory's URI is a prefix
    manifest = {"format": FORMAT, "uri": uri, "kind": kind, "source": req.get("source_ref", ""),
                "files": sorted(entries, key=lambda e: e["path"])}
    body = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    client.put_object(Bucket=req["bucket"], Key=req["manifest_key"], Body=body,
                      ContentType="application/json")
    state.data["complete"] = True
    state.save()
    say("done", sent, uri)


def main() -> int:
    try:
        req = json.loads(sys.stdin.readline())
    except ValueError:
        say("error", "the upload request on stdin is not JSON")
        return 2
    try:
        upload(req)
    except Refused as exc:
        say("error", exc)
        return 3
    except Exception as exc:
        say("error", _explain(exc, req))
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
