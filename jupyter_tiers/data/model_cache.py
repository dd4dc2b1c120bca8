"""The local serving tier's copy of a model in the object store: a cache directory keyed by what
is in the store, so that a re-run downloads nothing.

A checkpoint uploaded by ``--checkpoint-to`` has a manifest beside it (objectstore.py): the
cache entry is named by the manifest's digest, every file is checked against its sha256, and an
entry is used only once complete (a ``.complete`` marker written last). Any other
``s3://BUCKET/KEY`` (an object, or a prefix ending in ``/``) is keyed by its objects' keys,
sizes and ETags (one listing, no download on a re-run). Runs in the kernel with boto3 (the ``s3``
extra), with the kernel's own credentials (environment, ~/.aws).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import TiersError
from .objectstore import (
    MANIFEST_NAME,
    Manifest,
    ObjectStore,
    S3Uri,
    key_problem,
    parse_manifest,
    parse_uri,
)

COMPLETE = ".complete"


class FetchError(TiersError):
    """The model could not be fetched; one line naming the bucket or key and what is wrong."""


def cache_root() -> Path:
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "tiers" / "models"


def _client(store: ObjectStore | None) -> Any:
    try:
        import boto3
    except ImportError:
        raise FetchError("--model-from s3://...: boto3 is not installed in this kernel's python; "
                         "pip install 'jupyter-tiers[s3]'") from None
    return boto3.client("s3", endpoint_url=store.endpoint_url if store else None,
                        region_name=store.region if store else None)


def _explain(exc: Exception, uri: S3Uri) -> str:
    code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
    if code in ("NoSuchBucket",):
        return f"bucket {uri.bucket} does not exist"
    if code in ("NoSuchKey", "404"):
        return f"no object {uri} in bucket {uri.bucket}"
    if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
        return f"access to bucket {uri.bucket} denied: this kernel's credentials lack access ({code})"
    return f"{type(exc).__name__}: {exc}"


def _manifest_for(client: Any, uri: S3Uri) -> Manifest | None:
    """The manifest beside an uploaded checkpoint (``.../{job_id}/.jt-manifest.json``), if any
    and if it describes ``uri``."""
    parent = posixpath.dirname(uri.key)
    try:
        body = client.get_object(Bucket=uri.bucket, Key=posixpath.join(parent, MANIFEST_NAME))["Body"].read()
    except Exception:
        return None
    try:
        manifest = parse_manifest(body)
    except ValueError:
        return None
    return manifest if parse_uri(manifest.uri).key == uri.key else None


def _shown_key(key: str) -> str:
    text = "".join(c if c.isprintable() else "?" for c in str(key)[:120])
    return repr(text + ("..." if len(str(key)) > 120 else ""))


def _inside(entry: Path, dest: Path) -> bool:
    """Whether ``dest`` resolves to a path under ``entry`` (symlinks and '..' followed)."""
    root = entry.resolve()
    return dest.resolve().is_relative_to(root) and dest.resolve() != root


def _listing(client: Any, uri: S3Uri) -> list[tuple[str, int, str]]:
    """(key relative to the URI, size, ETag) of the object or of every object under the prefix."""
    if not uri.prefix:
        head = client.head_object(Bucket=uri.bucket, Key=uri.key)
        return [("", int(head["ContentLength"]), str(head.get("ETag", "")))]
    out = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=uri.bucket, Prefix=uri.key + "/"):
        for obj in page.get("Contents", []):
            rel = obj["Key"][len(uri.key) + 1:]
            marker = rel.endswith("/")  # a "folder" object (S3 consoles make them): nothing to fetch
            # The same check as a manifest's paths: a key of a shared bucket names where the
            # file lands, so '..', '.', '//' or a leading '/' would leave the cache entry.
            problem = key_problem(rel[:-1] if marker else rel, what="key")
            if not rel or (marker and not problem):
                continue
            if problem:
                raise FetchError(f"--model-from {uri}: the bucket lists key {_shown_key(obj['Key'])}, which "
                                 f"is not a safe path under the prefix ({problem}); nothing was downloaded")
            out.append((rel, int(obj["Size"]), str(obj.get("ETag", ""))))
    if not out:
        raise FetchError(f"--model-from {uri}: no objects under that prefix in bucket {uri.bucket}")
    return sorted(out)


@dataclass(frozen=True)
class FetchPlan:
    """What fetching a model would do: where it goes, whether it is there already, its size."""

    uri: S3Uri
    target: Path
    cached: bool
    files: int
    total_bytes: int
    manifest: bool  # described by an upload's manifest (checked by sha256)

    @property
    def line(self) -> str:
        """``model s3://... would be downloaded to PATH: 2 files, 12.3 MB (its manifest's
        sha256 checked)`` or ``... is cached at PATH``."""
        if self.cached:
            return f"model {self.uri} is cached at {self.target} (nothing to download)"
        size = f"{self.files} file{'s' if self.files != 1 else ''}, {self.total_bytes / 1e6:.1f} MB"
        check = " (checked against its manifest's sha256)" if self.manifest else ""
        return f"model {self.uri} would be downloaded to {self.target}: {size}{check}"


def _plan(client: Any, uri: S3Uri, root: Path | None) -> tuple[FetchPlan, Manifest | None,
                                                                list[tuple[str, int, str]], bool]:
    manifest = _manifest_for(client, uri)
    if manifest is not None:
        files = [(f.path, f.size, f.sha256) for f in manifest.files]
        digest = manifest.digest
        prefix = manifest.kind == "dir"
    else:
        files = _listing(client, uri)
        digest = hashlib.sha256(json.dumps([str(uri), files]).encode()).hexdigest()
        prefix = uri.prefix
    entry = (root or cache_root()) / digest[:32]
    target = entry / posixpath.basename(uri.key)
    plan = FetchPlan(uri, target, (entry / COMPLETE).exists(), len(files), sum(f[1] for f in files),
                     manifest is not None)
    return plan, manifest, files, prefix


def plan_model(uri_text: str, store: ObjectStore | None, root: Path | None = None) -> FetchPlan:
    """What :func:`fetch_model` would do (``--dry-run``): one listing (or the manifest), no
    download. The same one-line FetchError for a missing bucket or key."""
    uri = parse_uri(uri_text)
    if not uri.key:
        raise FetchError(f"--model-from {uri}: name an object or a prefix inside the bucket")
    client = _client(store)
    try:
        return _plan(client, uri, root)[0]
    except FetchError:
        raise
    except Exception as exc:
        raise FetchError(f"--model-from {uri}: {_explain(exc, uri)}") from None


def fetch_model(uri_text: str, store: ObjectStore | None, root: Path | None = None) -> tuple[Path, bool]:
    """The local path of the model at ``uri_text`` (downloaded into the cache unless already
    there) and whether anything was downloaded."""
    uri = parse_uri(uri_text)
    if not uri.key:
        raise FetchError(f"--model-from {uri}: name an object or a prefix inside the bucket")
    client = _client(store)
    try:
        plan, manifest, files, prefix = _plan(client, uri, root)
        target = plan.target
        entry, name = target.parent, target.name
        if plan.cached:
            return target, False
        if entry.exists():
            shutil.rmtree(entry)  # an interrupted download: start it over
        entry.mkdir(parents=True, mode=0o700)
        for rel, size, check in files:
            dest = target / rel if prefix else target
            if not _inside(entry, dest):  # belt and braces: the keys were checked already
                raise FetchError(f"--model-from {uri}: {rel or name} would be written outside "
                                 f"{entry}; nothing more was downloaded")
            dest.parent.mkdir(parents=True, exist_ok=True)
            key = posixpath.join(uri.key, rel) if prefix else uri.key
            client.download_file(uri.bucket, key, str(dest))
            if dest.stat().st_size != size:
                raise FetchError(f"--model-from {uri}: {rel or name} has {dest.stat().st_size} bytes, "
                                 f"expected {size}")
            if manifest is not None and _sha256(dest) != check:
                raise FetchError(f"--model-from {uri}: {rel or name} does not match its sha256 in the "
                                 "manifest")
        (entry / COMPLETE).write_text(str(uri))
        return target, True
    except FetchError:
        raise
    except Exception as exc:
        raise FetchError(f"--model-from {uri}: {_explain(exc, uri)}") from None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()



# --- the Kubernetes tier: a check from the kernel before anything is created -----------------------


@dataclass(frozen=True)
class KernelCheck:
    """Whether this kernel checked a ``--model-from s3://`` for the pods' init container, and
    the line that says how (``--dry-run`` prints it)."""

    checked: bool
    line: str


#: How the check reaches the store: bounded, so that an endpoint only the cluster can reach
#: costs seconds, not botocore's default minute of retries.
CHECK_TIMEOUT_S = 5


def check_model(uri_text: str, store: ObjectStore | None) -> KernelCheck:
    """Before a Kubernetes service is created: when this kernel has boto3 and AWS credentials of
    its own, HEAD the object (or list one key of the prefix) and raise a one-line FetchError
    when it, or its bucket, is missing. Otherwise (no credentials here: the pods use the
    profile's Secret; or they lack access, or the endpoint is unreachable from here) the check
    is skipped and the returned line says why."""
    uri = parse_uri(uri_text)
    secret = store.credentials_secret if store is not None else None
    pods = (f"the init container uses the Secret {secret}" if secret
            else "the init container uses the pods' own credentials")
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        return KernelCheck(False, f"{uri} not checked from this kernel (boto3 is not installed here); {pods}")
    session = boto3.session.Session(region_name=store.region if store else None)
    if session.get_credentials() is None:
        return KernelCheck(False, f"{uri} not checked from this kernel (it has no AWS credentials); {pods}")
    where = (store.endpoint_url if store is not None else None) or "AWS S3"
    how = f"checked from this kernel with its own AWS credentials at {where}"
    config = Config(connect_timeout=CHECK_TIMEOUT_S, read_timeout=CHECK_TIMEOUT_S * 3,
                    retries={"max_attempts": 1, "mode": "standard"})  # one attempt: a check only
    client = session.client("s3", endpoint_url=store.endpoint_url if store else None, config=config)
    try:
        if uri.prefix:
            page = client.list_objects_v2(Bucket=uri.bucket, Prefix=uri.key + "/", MaxKeys=1)
            if not page.get("Contents"):
                raise FetchError(f"--model-from {uri}: no objects under that prefix in bucket "
                                 f"{uri.bucket} ({how})")
            return KernelCheck(True, f"{uri} found ({how})")
        head = client.head_object(Bucket=uri.bucket, Key=uri.key)
        return KernelCheck(True, f"{uri} found: {int(head.get('ContentLength', 0)) / 1e6:.1f} MB ({how})")
    except FetchError:
        raise
    except Exception as exc:
        code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
        if code in ("NoSuchBucket",) or (code in ("404", "NoSuchKey") and not _bucket_exists(client, uri)):
            raise FetchError(f"--model-from {uri}: bucket {uri.bucket} does not exist at {where} "
                             f"({how})") from None
        if code in ("404", "NoSuchKey"):
            raise FetchError(f"--model-from {uri}: no object {uri.key} in bucket {uri.bucket} ({how}); "
                             "end the URI with / for a prefix") from None
        if code in ("AccessDenied", "403", "Forbidden", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
            why = f"this kernel's credentials lack access to bucket {uri.bucket} ({code})"
        elif type(exc).__name__ in ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError"):
            why = f"this kernel cannot reach {where}"
        else:
            why = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        return KernelCheck(False, f"{uri} not checked from this kernel ({why}); {pods}")


def _bucket_exists(client: Any, uri: S3Uri) -> bool:
    """After a HEAD's bare 404: is it the key or the bucket that is missing? (True when unsure.)"""
    try:
        client.head_bucket(Bucket=uri.bucket)
    except Exception as exc:
        code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
        return code not in ("404", "NoSuchBucket")
    return True
