"""Object storage (any S3 API) as profiles, URIs and manifests describe it (pure).

A profile's ``object_store`` says where its jobs (or pods) reach S3; :func:`parse_object_store`
validates it. ``s3://BUCKET/KEY`` URIs are parsed strictly (:func:`parse_uri`): bucket names as
S3 names them, keys of characters that need no quoting in a shell, a JSON document or a URL
path, and no empty, ``.`` or ``..`` segments. A training job's checkpoint goes to
``s3://BUCKET/PREFIX/{name}/{job_id}/{checkpoint}`` (:func:`checkpoint_destination`) with a
manifest (:class:`Manifest`: every file's path, size and sha256) uploaded last beside it, so
its presence means the upload is complete.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MANIFEST_FORMAT",
    "MANIFEST_NAME",
    "Manifest",
    "ManifestFile",
    "ObjectStore",
    "S3Uri",
    "checkpoint_destination",
    "parse_manifest",
    "parse_object_store",
    "parse_uri",
]

SCHEME = "s3://"
#: The manifest's object name, beside the checkpoint in ``{name}/{job_id}/``. A leading dot: a
#: checkpoint is never a hidden name (handoff.newest_entry), so the two cannot collide.
MANIFEST_NAME = ".jt-manifest.json"
MANIFEST_FORMAT = "jupyter-tiers/checkpoint-manifest/1"
#: What the manifest parser accepts at most (a hostile or broken object cannot exhaust memory).
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
MAX_MANIFEST_FILES = 100_000
MAX_KEY_BYTES = 1024  # S3's own limit on a key
CREDENTIALS = ("cluster", "kernel")
#: The init container's image when a Kubernetes profile sets no ``fetch_image``: the AWS CLI,
#: pinned by digest (a tag can be moved; this image is handed the store's credentials). A
#: profile's ``fetch_image`` may still name a tag.
DEFAULT_FETCH_IMAGE = ("amazon/aws-cli:2.15.0"
                       "@sha256:e2a778146a45cb7cdcc55e3051c0de38ea9f180ed88383447f7ead6b0ba5e9a4")

_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_IPV4_RE = re.compile(r"\d{1,3}(\.\d{1,3}){3}")
_SEGMENT_RE = re.compile(r"[A-Za-z0-9_.+=,@:-]+")
_REGION_RE = re.compile(r"[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?")
_ENDPOINT_RE = re.compile(r"https?://[A-Za-z0-9.-]+(:\d{1,5})?(/[A-Za-z0-9._~/-]*)?")
_SECRET_RE = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")


def _shown(value: Any, limit: int = 60) -> str:
    text = str(value)
    out = "".join(c if c.isprintable() else "?" for c in text[:limit])
    return out + ("..." if len(text) > limit else "")


# --- URIs ---------------------------------------------------------------------------------------


def bucket_problem(name: str) -> str | None:
    """Why ``name`` is not an S3 bucket name (general-purpose bucket rules), or None."""
    if not isinstance(name, str) or not _BUCKET_RE.fullmatch(name):
        return ("a bucket name is 3-63 characters of lower-case letters, digits, '.' and '-', "
                "starting and ending with a letter or digit")
    if ".." in name:
        return "a bucket name has no two adjacent dots"
    if _IPV4_RE.fullmatch(name):
        return "a bucket name is not an IP address"
    if name.startswith(("xn--", "sthree-")) or name.endswith(("-s3alias", "--ol-s3")):
        return "a bucket name does not start with xn-- or sthree- nor end with -s3alias or --ol-s3"
    return None


def key_problem(key: str, *, what: str = "key") -> str | None:
    """Why ``key`` (no leading or trailing ``/``; may be empty) is not a key we use, or None."""
    if not isinstance(key, str):
        return f"a {what} is text"
    if key == "":
        return None
    if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        return f"a {what} is at most {MAX_KEY_BYTES} bytes"
    for segment in key.split("/"):
        if segment in ("", ".", ".."):
            return f"a {what} has no empty, '.' or '..' segments (no '//')"
        if not _SEGMENT_RE.fullmatch(segment):
            return f"a {what} uses letters, digits and _ . + = , @ : - between '/'"
    return None


@dataclass(frozen=True)
class S3Uri:
    """``s3://bucket/key``. ``key`` has no leading or trailing ``/``; ``prefix`` says the URI
    was written with a trailing ``/`` (a "directory")."""

    bucket: str
    key: str = ""
    prefix: bool = False

    def __str__(self) -> str:
        tail = "/" if self.prefix and self.key else ""
        return f"{SCHEME}{self.bucket}/{self.key}{tail}" if self.key else f"{SCHEME}{self.bucket}/"

    def join(self, *parts: str, prefix: bool = False) -> S3Uri:
        """This URI with ``parts`` (each one or more segments) appended; validated."""
        key = "/".join(p.strip("/") for p in (self.key, *parts) if p and p.strip("/"))
        problem = key_problem(key)
        if problem:
            raise ValueError(f"{SCHEME}{self.bucket}/{_shown(key)}: {problem}")
        return S3Uri(self.bucket, key, prefix)


def parse_uri(text: str) -> S3Uri:
    """``s3://BUCKET[/KEY[/]]`` -> S3Uri; ValueError naming what is wrong and what is allowed."""
    if not isinstance(text, str) or not text.startswith(SCHEME):
        raise ValueError(f"{_shown(text)!r} is not an s3:// URI; write s3://BUCKET/PREFIX")
    rest = text[len(SCHEME):]
    bucket, _, key = rest.partition("/")
    problem = bucket_problem(bucket)
    if problem:
        raise ValueError(f"{_shown(text)!r}: bucket {_shown(bucket)!r}: {problem}")
    trailing = key.endswith("/")
    key = key[:-1] if trailing else key
    problem = key_problem(key)
    if problem:
        raise ValueError(f"{_shown(text)!r}: {problem}")
    return S3Uri(bucket, key, trailing and bool(key))


# --- the profile's object_store ------------------------------------------------------------------


@dataclass(frozen=True)
class ObjectStore:
    """A profile's ``object_store``: where its jobs or pods reach S3, and with what credentials."""

    bucket: str
    prefix: str = ""
    endpoint_url: str | None = None
    region: str | None = None
    credentials: str = "cluster"  # Slurm and local: cluster | kernel
    credentials_secret: str | None = None  # Kubernetes: a Secret with AWS_ACCESS_KEY_ID/...
    allow_insecure_endpoint: bool = False  # an http:// endpoint_url is accepted (loopback, tests)

    @property
    def root(self) -> S3Uri:
        """``s3://bucket/prefix/``: where this store's checkpoints go."""
        return S3Uri(self.bucket, self.prefix, True)


def parse_object_store(value: Any, tier: str | None) -> ObjectStore:
    """A profile's ``object_store`` mapping -> ObjectStore. Raises ``ValueError((key, message))``:
    ``key`` is the sub-key at fault (``""`` for the mapping itself)."""
    if not isinstance(value, Mapping):
        raise ValueError(("", f"expected a mapping {{bucket: ..., ...}}, got {type(value).__name__}"))
    keys = {"endpoint_url", "bucket", "prefix", "region", "allow_insecure_endpoint"}
    if tier in ("slurm", "local"):
        keys.add("credentials")
    elif tier == "kubernetes":
        keys.add("credentials_secret")
    else:
        keys |= {"credentials", "credentials_secret"}
    for k in value:
        if k not in keys:
            raise ValueError((_shown(k), f"unknown key; allowed: {', '.join(sorted(keys))}"))
    for k, v in value.items():
        if k == "allow_insecure_endpoint":
            if not isinstance(v, bool):
                raise ValueError((k, f"true or false, got {_shown(v)!r}"))
        elif not isinstance(v, str):
            raise ValueError((k, f"expected a string, got {type(v).__name__}"))
    if "bucket" not in value:
        raise ValueError(("bucket", "required: the bucket the checkpoints go to"))
    problem = bucket_problem(value["bucket"])
    if problem:
        raise ValueError(("bucket", f"{_shown(value['bucket'])!r}: {problem}"))
    prefix = value.get("prefix", "").strip("/")
    problem = key_problem(prefix, what="prefix")
    if problem:
        raise ValueError(("prefix", f"{_shown(value['prefix'])!r}: {problem}"))
    endpoint = value.get("endpoint_url")
    if endpoint is not None and not _ENDPOINT_RE.fullmatch(endpoint):
        raise ValueError(("endpoint_url", f"{_shown(endpoint)!r}: use http(s)://HOST[:PORT][/PATH], "
                          "no user, query or fragment"))
    insecure = value.get("allow_insecure_endpoint", False)
    if endpoint is not None and endpoint.startswith("http://") and not insecure:
        # Plain HTTP carries the credentials' signatures and every checkpoint byte in clear.
        raise ValueError(("endpoint_url", f"{_shown(endpoint)!r}: plain http:// sends the checkpoints "
                          "unencrypted; use https://, or add allow_insecure_endpoint: true to this "
                          "object_store (a loopback or test store)"))
    region = value.get("region")
    if region is not None and not _REGION_RE.fullmatch(region):
        raise ValueError(("region", f"{_shown(region)!r}: a region such as us-east-1 (lower-case "
                          "letters, digits, '-')"))
    credentials = value.get("credentials", "cluster")
    if credentials not in CREDENTIALS:
        raise ValueError(("credentials", f"{_shown(credentials)!r}: cluster (the login node's own "
                          "~/.aws, environment or instance role) or kernel (the notebook's AWS_* "
                          "environment, sent per command on stdin)"))
    secret = value.get("credentials_secret")
    if secret is not None and not _SECRET_RE.fullmatch(secret):
        raise ValueError(("credentials_secret", f"{_shown(secret)!r}: a Secret name (DNS-1123 "
                          "subdomain) holding AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"))
    return ObjectStore(bucket=value["bucket"], prefix=prefix, endpoint_url=endpoint, region=region,
                       credentials=credentials, credentials_secret=secret,
                       allow_insecure_endpoint=bool(insecure))


def checkpoint_to_uri(value: str, store: ObjectStore | None) -> S3Uri:
    """A ``--checkpoint-to`` value (``store`` or ``s3://BUCKET/PREFIX``) -> the root URI under
    which ``{name}/{job_id}/{checkpoint}`` goes."""
    if value == "store":
        if store is None:
            raise ValueError("--checkpoint-to store: the profile has no object_store; add one "
                             "(bucket, ...) or give s3://BUCKET/PREFIX")
        return store.root
    if not isinstance(value, str) or not value.startswith(SCHEME):
        raise ValueError(f"--checkpoint-to {_shown(value)!r}: write store (the profile's "
                         "object_store) or s3://BUCKET/PREFIX")
    return parse_uri(value)


@dataclass(frozen=True)
class Destination:
    """Where one job's checkpoint goes: its object (or prefix of objects) and its manifest."""

    checkpoint: S3Uri  # the file's object, or the directory's prefix (prefix=True)
    manifest: S3Uri

    @property
    def shown(self) -> str:
        """The URI as summary lines show it (a directory with its trailing ``/``)."""
        return str(self.checkpoint)


def checkpoint_destination(root: S3Uri, name: str, job_id: str, checkpoint: str, *,
                           is_dir: bool) -> Destination:
    """``s3://BUCKET/PREFIX/{name}/{job_id}/{checkpoint}`` and its manifest beside it."""
    if not checkpoint or checkpoint.startswith(".") or "/" in checkpoint:
        raise ValueError(f"checkpoint name {_shown(checkpoint)!r}: one non-hidden path component")
    base = root.join(name, job_id)
    return Destination(base.join(checkpoint, prefix=is_dir), base.join(MANIFEST_NAME))


# --- manifests -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ManifestFile:
    """One uploaded file: its path under the checkpoint (``""`` for a single-file checkpoint)."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """What a complete upload holds; written last, so its presence means complete."""

    uri: str  # the checkpoint's URI (str(S3Uri))
    kind: str  # file | dir
    files: tuple[ManifestFile, ...]
    source: str = ""  # profile/job_id (name)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, files sorted by path): equal manifests, equal bytes."""
        return json.dumps({
            "format": MANIFEST_FORMAT, "uri": self.uri, "kind": self.kind, "source": self.source,
            "files": [{"path": f.path, "size": f.size, "sha256": f.sha256}
                      for f in sorted(self.files, key=lambda f: f.path)],
        }, sort_keys=True, separators=(",", ":"))

    @property
    def digest(self) -> str:
        """sha256 of the canonical JSON: names a local download cache entry."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()


def parse_manifest(text: str | bytes) -> Manifest:
    """A manifest's JSON -> Manifest; ValueError with one line saying what is wrong."""
    if isinstance(text, bytes):
        if len(text) > MAX_MANIFEST_BYTES:
            raise ValueError(f"manifest larger than {MAX_MANIFEST_BYTES} bytes")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("manifest is not UTF-8") from None
    if not isinstance(text, str) or len(text) > MAX_MANIFEST_BYTES:
        raise ValueError(f"manifest is not text of at most {MAX_MANIFEST_BYTES} bytes")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise ValueError("manifest is not JSON") from None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise ValueError(f"manifest format is not {MANIFEST_FORMAT}")
    uri, kind, source, files = data.get("uri"), data.get("kind"), data.get("source", ""), data.get("files")
    if not isinstance(uri, str):
        raise ValueError("manifest uri is not a string")
    parse_uri(uri)
    if kind not in ("file", "dir"):
        raise ValueError("manifest kind is not file or dir")
    if not isinstance(source, str) or len(source) > 1000:
        raise ValueError("manifest source is not a short string")
    if not isinstance(files, list) or not 1 <= len(files) <= MAX_MANIFEST_FILES:
        raise ValueError(f"manifest files is not a list of 1 to {MAX_MANIFEST_FILES} entries")
    out: list[ManifestFile] = []
    seen: set[str] = set()
    for n, entry in enumerate(files):
        if not isinstance(entry, dict) or set(entry) != {"path", "size", "sha256"}:
            raise ValueError(f"manifest files[{n}] is not {{path, size, sha256}}")
        path, size, sha = entry["path"], entry["size"], entry["sha256"]
        if kind == "file":
            if path != "" or len(files) != 1:
                raise ValueError("a file checkpoint's manifest has one entry with path \"\"")
        else:
            problem = key_problem(path, what="file path") if path else "a file path is not empty"
            if problem:
                raise ValueError(f"manifest files[{n}].path {_shown(path)!r}: {problem}")
        if path in seen:
            raise ValueError(f"manifest files[{n}].path {_shown(path)!r} appears twice")
        seen.add(path)
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError(f"manifest files[{n}].size is not a non-negative integer")
        if not isinstance(sha, str) or not _SHA256_RE.fullmatch(sha):
            raise ValueError(f"manifest files[{n}].sha256 is not 64 lower-case hex digits")
        out.append(ManifestFile(path, size, sha))
    return Manifest(uri=uri, kind=kind, files=tuple(out), source=source)


def object_key(manifest_or_uri: Manifest | S3Uri, path: str) -> str:
    """The object key of one manifest file (``path`` "" is the single-file checkpoint itself)."""
    uri = parse_uri(manifest_or_uri.uri) if isinstance(manifest_or_uri, Manifest) else manifest_or_uri
    return posixpath.join(uri.key, path) if path else uri.key


def progress_text(sent: int, total: int) -> str:
    """``40% (12.0/30.0 MB)``."""
    pct = 100 if total <= 0 else min(100, int(sent * 100 / total))
    return f"{pct}% ({sent / 1e6:.1f}/{total / 1e6:.1f} MB)"


def kernel_credentials(env: Mapping[str, str], names: Sequence[str] = (
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")) -> dict[str, str]:
    """The notebook's AWS_* credentials (for ``credentials: kernel``); ValueError naming what is
    missing (never a value)."""
    got = {k: env[k] for k in names if env.get(k)}
    missing = [k for k in names[:2] if k not in got]
    if missing:
        raise ValueError(f"credentials: kernel, but {' and '.join(missing)} "
                         f"{'is' if len(missing) == 1 else 'are'} not set in the kernel's environment")
    return got


# --- the uploader's output (s3_upload.py) --------------------------------------------------------

UPLOAD_MARK = "@@jt-upload"


@dataclass(frozen=True)
class UploadReport:
    """What an uploader run printed: its last progress, and how it ended (if it did)."""

    sent: int = 0  # bytes of the checkpoint on the server (this run and earlier ones)
    total: int = 0
    done_uri: str | None = None
    sent_this_run: int = 0  # bytes this run sent (a resumed run sends only what was missing)
    error: str | None = None
    busy: bool = False  # another run of the same upload holds the lock


def parse_upload_output(text: str, report: UploadReport | None = None) -> UploadReport:
    """``@@jt-upload`` lines -> UploadReport (folded over ``report``); other lines are ignored,
    so arbitrary text never raises."""
    from dataclasses import replace

    out = report or UploadReport()
    for line in text.split("\n"):
        if not line.startswith(UPLOAD_MARK + " "):
            continue
        word, _, rest = line[len(UPLOAD_MARK) + 1:].partition(" ")
        if word == "progress":
            a, _, b = rest.partition(" ")
            if a.isascii() and a.isdigit() and b.isascii() and b.isdigit() and len(a) < 20 and len(b) < 20:
                out = replace(out, sent=int(a), total=int(b))
        elif word == "done":
            n, _, uri = rest.partition(" ")
            if n.isascii() and n.isdigit() and len(n) < 20 and uri.startswith(SCHEME):
                out = replace(out, done_uri=_shown(uri, 2000), sent_this_run=int(n),
                              sent=out.total or out.sent)
        elif word == "error":
            out = replace(out, error=_shown(rest.strip(), 500) or "the uploader failed")
        elif word == "busy":
            out = replace(out, busy=True)
    return out
