"""Serving from object storage (pure): an init container that copies the model from S3 into an
``emptyDir`` at /models before the server container starts.

``--model-from`` on a Kubernetes profile with an ``object_store`` and no ``model_volume`` covering
the checkpoint (or ``--model-from s3://BUCKET/KEY``) sets the spec's ``model_uri``; the tier then
passes the rendered objects through :func:`add_model_fetch`. The init container (image: the
profile's ``fetch_image``, default the AWS CLI's, pinned by digest) runs ``aws s3 cp`` from a fixed
script (:data:`FETCH_SH`, values as arguments only) and then checks every file against the
upload's manifest (size and sha256, and no file it does not list), its
credentials from the profile's ``credentials_secret`` (``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY``, and ``AWS_SESSION_TOKEN`` if the Secret has it). A URI ending in ``/``
is a prefix (a directory checkpoint, copied recursively), any other one object. The shapes follow
a real cluster's (/work/shared/facts/k8s-golden/13a-init-container-emptydir.json).

When the copy fails, the init container's ``terminationMessagePolicy: FallbackToLogsOnError``
puts the end of its log (the AWS CLI's ``fatal error: An error occurred (403) when calling the
HeadObject operation: Forbidden``) into the pod's status, and :func:`fetch_failure` turns it
into one line naming the URI and the credentials Secret (the pod row, the summary, the widget).
"""

from __future__ import annotations

import copy
import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.errors import SpecError
from ..data.handoff import MODEL_DIR, fetched_model_path, model_uri
from ..data.objectstore import DEFAULT_FETCH_IMAGE, MANIFEST_NAME, ObjectStore, S3Uri

VOLUME = "models"
FETCH_CONTAINER = "fetch-model"


# $1 the URI, $2 where it goes under /models, $3 the manifest's URI, then aws's own options. The
# copy, then, when a manifest beside the checkpoint describes this URI (the uploader wrote it:
# canonical JSON, objectstore.Manifest.to_json), every file's size and sha256 are checked and no
# file may be there that it does not list. A mismatch ends the pod's init with one line
# (fetch_failure reads it). Plain sh with coreutils, grep, sed and find: the AWS CLI's image has
# them (Amazon Linux 2); no python, no jq.
FETCH_SH = r"""set -euf
uri=$1 dest=$2 man=$3
shift 3
case "$uri" in
  */) aws s3 cp --no-progress --recursive "$@" "$uri" "$dest" ;;
  *) aws s3 cp --no-progress "$@" "$uri" "$dest" ;;
esac
base=${dest%/}
m="${base%/*}/.jt-manifest.json"
if ! out=$(aws s3 cp --no-progress "$@" "$man" "$m" 2>&1); then
  case "$out" in
    *"(404)"*|*NoSuchKey*|*"Not Found"*)
      echo "jt-fetch: no manifest beside $uri: its files were copied unchecked"; exit 0 ;;
  esac
  printf '%s\n' "$out" >&2
  exit 1
fi
flat=$(tr -d ' \t\r\n' < "$m")
rm -f -- "$m"
case "$flat" in *"\"uri\":\"$uri\""*) ;; *)
  echo "jt-fetch: the manifest beside $uri describes another upload: copied unchecked"
  exit 0 ;; esac
fail() { echo "jt-fetch: $*" >&2; exit 1; }
entries=$(printf '%s' "$flat" | grep -o '{"path":"[^"]*","sha256":"[0-9a-f]*","size":[0-9]*}' || true)
listed=$(printf '%s' "$flat" | grep -o '"path":' | wc -l)
count=$(printf '%s\n' "$entries" | grep -c . || true)
[ "$count" -gt 0 ] && [ "$count" -eq "$listed" ] ||
  fail "the manifest beside $uri is not in the form the uploader writes"
for e in $entries; do
  p=$(printf '%s' "$e" | sed 's/^{"path":"\([^"]*\)".*/\1/')
  sha=$(printf '%s' "$e" | sed 's/.*"sha256":"\([0-9a-f]*\)".*/\1/')
  size=$(printf '%s' "$e" | sed 's/.*"size":\([0-9]*\)}$/\1/')
  case "$p" in
    "") f=$base ;;
    /*|*//*|..|../*|*/..|*/../*|.|./*|*/.|*/./*|*[!A-Za-z0-9_.+=,@:/-]*)
      fail "the manifest beside $uri lists an unsafe path" ;;
    *) f=$base/$p ;;
  esac
  [ -f "$f" ] && [ ! -L "$f" ] || fail "${p:-$uri} is in the manifest but was not copied"
  [ "$(wc -c < "$f" | tr -d ' ')" = "$size" ] || fail "${p:-$uri} does not have the size its manifest says"
  [ "$(sha256sum < "$f" | cut -c1-64)" = "$sha" ] ||
    fail "${p:-$uri} does not match its sha256 in the manifest"
done
if [ -d "$base" ]; then
  found=$(find "$base" -type f | wc -l)
  [ "$found" -eq "$count" ] || fail "$found files were copied but the manifest lists $count"
fi
echo "jt-fetch: every file ($count) matches the manifest's size and sha256"
"""


def fetch_command(uri: str, store: ObjectStore | None) -> list[str]:
    """The init container's argv: :data:`FETCH_SH` (copy, then check against the manifest)
    with the URI, its place under /models, the manifest's URI and aws's options as arguments
    (never pasted into the script; every word validated)."""
    parsed = model_uri(uri)
    target = fetched_model_path(uri)
    manifest = S3Uri(parsed.bucket, posixpath.join(posixpath.dirname(parsed.key), MANIFEST_NAME))
    options = ["--endpoint-url", store.endpoint_url] if store is not None and store.endpoint_url else []
    return ["sh", "-c", FETCH_SH, "jt-fetch", str(parsed), target + ("/" if parsed.prefix else ""),
            str(manifest), *options]


def fetch_init_container(uri: str, store: ObjectStore | None, image: str | None) -> dict[str, Any]:
    """The init container that copies ``uri`` into the ``models`` emptyDir."""
    env: list[dict[str, Any]] = []
    if store is not None and store.region:
        env.append({"name": "AWS_DEFAULT_REGION", "value": store.region})
    if store is not None and store.credentials_secret:
        for key, optional in (("AWS_ACCESS_KEY_ID", False), ("AWS_SECRET_ACCESS_KEY", False),
                              ("AWS_SESSION_TOKEN", True)):
            ref: dict[str, Any] = {"name": store.credentials_secret, "key": key}
            if optional:
                ref["optional"] = True
            env.append({"name": key, "valueFrom": {"secretKeyRef": ref}})
    container: dict[str, Any] = {
        "name": FETCH_CONTAINER,
        "image": image or DEFAULT_FETCH_IMAGE,
        "command": fetch_command(uri, store),
        "volumeMounts": [{"name": VOLUME, "mountPath": MODEL_DIR}],
        # The end of its log becomes its termination message (fetch_failure reads it).
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if env:
        container["env"] = env
    return container


def add_model_fetch(objects: Sequence[dict[str, Any]], uri: str, store: ObjectStore | None,
                    image: str | None) -> list[dict[str, Any]]:
    """``objects`` with the Deployment's pods fetching ``uri`` first: an init container, an
    emptyDir ``models`` volume, and the server containers mounting it read-only at /models with
    ``JT_MODEL_DIR``. Raises SpecError when the pods already have a ``models`` volume (a
    ``model_volume``: the profile serves from shared storage, not from the object store)."""
    out = [copy.deepcopy(o) for o in objects]
    for obj in out:
        if obj.get("kind") != "Deployment":
            continue
        pod = obj["spec"]["template"]["spec"]
        volumes = pod.setdefault("volumes", [])
        if any(v.get("name") == VOLUME for v in volumes):
            raise SpecError("model_uri", "the profile's model_volume is already mounted at /models; "
                            "serve from one or the other")
        volumes.append({"name": VOLUME, "emptyDir": {}})
        pod.setdefault("initContainers", []).append(fetch_init_container(uri, store, image))
        for container in pod.get("containers", []):
            container.setdefault("volumeMounts", []).append(
                {"name": VOLUME, "mountPath": MODEL_DIR, "readOnly": True})
            env = container.setdefault("env", [])
            if not any(e.get("name") == "JT_MODEL_DIR" for e in env):
                env.insert(0, {"name": "JT_MODEL_DIR", "value": MODEL_DIR})
    return out


# --- why the fetch failed (pure) -------------------------------------------------------------------

#: botocore's ClientError text, which the AWS CLI prints after ``fatal error: ``.
_CLIENT_ERROR = re.compile(r"An error occurred \(([A-Za-z0-9]{1,64})\) when calling the ([A-Za-z0-9]{1,64}) "
                           r"operation(?: \(reached max retries: \d+\))?: ?([^\n]*)")
_NOT_FOUND = ("404", "NoSuchKey", "NotFound")
_DENIED = ("403", "AccessDenied", "Forbidden", "AllAccessDisabled")
_REFUSED = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken",
            "InvalidClientTokenId")


def _fetch_spec(pod_spec: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(URI, endpoint, credentials Secret) from the pod's fetch-model init container."""
    inits = pod_spec.get("initContainers")
    for c in inits if isinstance(inits, list) else ():
        if not isinstance(c, Mapping) or c.get("name") != FETCH_CONTAINER:
            continue
        command = c.get("command")
        argv = [a for a in command if isinstance(a, str)] if isinstance(command, list) else []
        uri = next((a for a in argv if a.startswith("s3://")), None)
        endpoint = argv[argv.index("--endpoint-url") + 1] if "--endpoint-url" in argv[:-1] else None
        secret = None
        env = c.get("env")
        for e in env if isinstance(env, list) else ():
            source = e.get("valueFrom") if isinstance(e, Mapping) else None
            ref = source.get("secretKeyRef") if isinstance(source, Mapping) else None
            if isinstance(ref, Mapping) and e.get("name") == "AWS_ACCESS_KEY_ID":
                secret = str(ref.get("name") or "") or None
        return uri, endpoint, secret
    return None, None, None


def fetch_failure(message: str | None, pod_spec: Mapping[str, Any], exit_code: int | None = None) -> str:
    """The fetch-model init container's failure in one line, from its termination message (the
    end of its log) and the pod's spec: ``init container fetch-model: s3://team-ckpt/x: 403
    Forbidden — check the Secret s3-creds (its credentials lack access to bucket team-ckpt)``."""
    uri, endpoint, secret = _fetch_spec(pod_spec)
    bucket = uri[len("s3://"):].split("/", 1)[0] if uri else "?"
    check = f"check the Secret {secret}" if secret else "the profile's object_store has no credentials_secret"
    text = message or ""
    head = f"init container {FETCH_CONTAINER}: {uri or 's3://?'}: "
    mine = [ln.strip()[len("jt-fetch: "):] for ln in text.splitlines() if ln.strip().startswith("jt-fetch: ")]
    match = _CLIENT_ERROR.search(text)
    if mine and not match:  # FETCH_SH's own check: a file that does not match its manifest
        line = head + mine[-1]
    elif match:
        code, operation, said = match.group(1), match.group(2), match.group(3).strip()
        if code == "NoSuchBucket":
            line = head + f"bucket {bucket} does not exist" + (f" at {endpoint}" if endpoint else "")
        elif code in _NOT_FOUND:
            what = "no such key" if operation in ("HeadObject", "GetObject") else "not found"
            line = head + f"404 Not Found — {what} in bucket {bucket} (or no such bucket)"
        elif code in _DENIED:
            line = head + f"403 Forbidden — {check} (its credentials lack access to bucket {bucket})"
        elif code in _REFUSED:
            line = head + f"the object store refused the credentials ({code}) — {check}"
        else:
            line = head + f"{code} from {operation}" + (f": {said}" if said else "")
    elif "Unable to locate credentials" in text:
        line = head + f"no credentials in the pod — {check}"
    elif "Could not connect to the endpoint URL" in text or "Connect timeout" in text:
        line = head + f"cannot reach {endpoint or 'AWS S3'} from the pod"
    else:
        last = next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "")
        code = f"exit {exit_code}" if exit_code is not None else "failed"
        line = head + code + (f": {last}" if last else "")
    line = " ".join(line.split())
    return line if len(line) <= 400 else line[:399] + "…"
