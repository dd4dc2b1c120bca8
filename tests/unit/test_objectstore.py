"""objectstore.py (pure): s3:// URIs, the profile's object_store, the destination layout, the
manifest and the uploader's output; with seeded fuzz of every parser (only ValueError, or a
value that round-trips, whatever the input)."""

from __future__ import annotations

import json
import random
import textwrap
from pathlib import Path

import pytest

from jupyter_tiers.config.profiles import ConfigError, load_config
from jupyter_tiers.data.objectstore import (
    MANIFEST_FORMAT,
    Manifest,
    ManifestFile,
    S3Uri,
    bucket_problem,
    checkpoint_destination,
    checkpoint_to_uri,
    kernel_credentials,
    parse_manifest,
    parse_object_store,
    parse_upload_output,
    parse_uri,
    progress_text,
)

SEED = 20261203
SHA = "a" * 64


@pytest.mark.parametrize("text, bucket, key, prefix", [
    ("s3://team-ckpt", "team-ckpt", "", False),
    ("s3://team-ckpt/", "team-ckpt", "", False),
    ("s3://team-ckpt/jt", "team-ckpt", "jt", False),
    ("s3://team-ckpt/jt/llama-ft/42/ckpt-000100/", "team-ckpt", "jt/llama-ft/42/ckpt-000100", True),
    ("s3://a.b-c/x=1,y@2:z+", "a.b-c", "x=1,y@2:z+", False),
])
def test_uris_parse_and_print_back(text: str, bucket: str, key: str, prefix: bool) -> None:
    uri = parse_uri(text)
    assert (uri.bucket, uri.key, uri.prefix) == (bucket, key, prefix)
    assert parse_uri(str(uri)) == uri


@pytest.mark.parametrize("text, says", [
    ("http://b/k", "not an s3:// URI"),
    ("s3:/bucket/k", "not an s3:// URI"),
    ("s3://Bucket/k", "lower-case"),
    ("s3://ab/k", "3-63"),
    ("s3://a..b/k", "adjacent dots"),
    ("s3://192.168.1.1/k", "IP address"),
    ("s3://xn--abc/k", "xn--"),
    ("s3://b-s3alias/k", "-s3alias"),
    ("s3://bucket//k", "empty"),
    ("s3://bucket/a/../k", "'..'"),
    ("s3://bucket/a/./k", "'.'"),
    ("s3://bucket/a b", "letters, digits"),
    ("s3://bucket/a;rm -rf", "letters, digits"),
    ("s3://bucket/$(id)", "letters, digits"),
    ("s3://bucket/" + "k" * 1025, "1024 bytes"),
])
def test_bad_uris_are_one_line_naming_the_rule(text: str, says: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_uri(text)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_the_destination_layout_and_the_manifest_beside_it() -> None:
    root = parse_uri("s3://team-ckpt/jt/")
    d = checkpoint_destination(root, "llama-ft", "42", "ckpt-000100", is_dir=True)
    assert d.shown == "s3://team-ckpt/jt/llama-ft/42/ckpt-000100/"
    assert str(d.manifest) == "s3://team-ckpt/jt/llama-ft/42/.jt-manifest.json"
    f = checkpoint_destination(S3Uri("b-1"), "n", "7_3", "model.pt", is_dir=False)
    assert f.shown == "s3://b-1/n/7_3/model.pt"
    for bad in (".hidden", "a/b", ""):
        with pytest.raises(ValueError):
            checkpoint_destination(root, "n", "1", bad, is_dir=False)


def test_object_store_keys_per_tier_with_precise_errors() -> None:
    s = parse_object_store({"endpoint_url": "http://127.0.0.1:9000", "allow_insecure_endpoint": True,
                            "bucket": "team-ckpt",
                            "prefix": "/jt/", "region": "us-east-1", "credentials": "kernel"}, "slurm")
    assert (s.bucket, s.prefix, s.credentials, str(s.root)) == ("team-ckpt", "jt", "kernel", "s3://team-ckpt/jt/")
    k = parse_object_store({"bucket": "team-ckpt", "credentials_secret": "s3-creds"}, "kubernetes")
    assert k.credentials_secret == "s3-creds"
    cases = [
        ({"bucket": "b-1", "credentials_secret": "x"}, "slurm", "credentials_secret"),
        ({"bucket": "b-1", "credentials": "kernel"}, "kubernetes", "credentials"),
        ({}, "local", "bucket"),
        ({"bucket": "B"}, "local", "bucket"),
        ({"bucket": "b-1", "credentials": "env"}, "local", "credentials"),
        ({"bucket": "b-1", "endpoint_url": "ftp://x"}, "local", "endpoint_url"),
        ({"bucket": "b-1", "endpoint_url": "http://u:p@x"}, "local", "endpoint_url"),
        ({"bucket": "b-1", "endpoint_url": "http://s3.lab:9000"}, "local", "endpoint_url"),
        ({"bucket": "b-1", "endpoint_url": "http://127.0.0.1:9000"}, "kubernetes", "endpoint_url"),
        ({"bucket": "b-1", "endpoint_url": "http://s3.lab", "allow_insecure_endpoint": "yes"}, "local",
         "allow_insecure_endpoint"),
        ({"bucket": "b-1", "region": "US East"}, "local", "region"),
        ({"bucket": "b-1", "prefix": "a//b"}, "local", "prefix"),
        ({"bucket": 3}, "local", "bucket"),
        ("team-ckpt", "local", ""),
    ]
    for value, tier, key in cases:
        with pytest.raises(ValueError) as err:
            parse_object_store(value, tier)
        assert err.value.args[0][0] == key, (value, err.value.args)


def test_a_profiles_object_store_is_validated_by_load_config(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "tiers.yaml"
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    path.write_text(textwrap.dedent("""\
        profiles:
          hpc: {tier: slurm, host: h, object_store: {bucket: team-ckpt, credentials: kernel}}
          serving: {tier: kubernetes, fetch_image: "amazon/aws-cli:2.15.0",
                    object_store: {bucket: team-ckpt, credentials_secret: s3-creds}}
        """))
    assert load_config().profile("hpc").get("object_store")["credentials"] == "kernel"
    path.write_text("profiles:\n  hpc: {tier: slurm, host: h, object_store: {bucket: x}}\n")
    with pytest.raises(ConfigError) as err:
        load_config()
    assert "profiles.hpc.object_store.bucket" in str(err.value) and "3-63" in str(err.value)
    path.write_text("profiles:\n  k: {tier: kubernetes, fetch_image: 'a b'}\n")
    with pytest.raises(ConfigError, match="fetch_image"):
        load_config()


def test_checkpoint_to_store_needs_the_profiles_object_store() -> None:
    store = parse_object_store({"bucket": "team-ckpt", "prefix": "jt"}, "slurm")
    assert str(checkpoint_to_uri("store", store)) == "s3://team-ckpt/jt/"
    assert str(checkpoint_to_uri("s3://other/p", store)) == "s3://other/p"
    with pytest.raises(ValueError, match="no object_store"):
        checkpoint_to_uri("store", None)
    with pytest.raises(ValueError, match="write store"):
        checkpoint_to_uri("/scratch/x", None)


def manifest_json(**over: object) -> str:
    data: dict[str, object] = {"format": MANIFEST_FORMAT, "uri": "s3://b-1/n/1/c/", "kind": "dir",
                               "source": "hpc/1 (n)", "files": [{"path": "w.bin", "size": 3, "sha256": SHA}]}
    data.update(over)
    return json.dumps(data)


def test_manifests_round_trip_canonically_and_bad_ones_are_refused() -> None:
    m = Manifest("s3://b-1/n/1/c/", "dir", (ManifestFile("z", 1, SHA), ManifestFile("a/b", 2, SHA)), "s")
    again = parse_manifest(m.to_json())
    assert again.to_json() == m.to_json() and again.digest == m.digest and again.total_bytes == 3
    assert parse_manifest(manifest_json().encode()).files == (ManifestFile("w.bin", 3, SHA),)
    bad = [
        manifest_json(format="other"),
        manifest_json(kind="link"),
        manifest_json(uri="s3://B/x"),
        manifest_json(files=[]),
        manifest_json(files=[{"path": "../x", "size": 1, "sha256": SHA}]),
        manifest_json(files=[{"path": "x", "size": -1, "sha256": SHA}]),
        manifest_json(files=[{"path": "x", "size": True, "sha256": SHA}]),
        manifest_json(files=[{"path": "x", "size": 1, "sha256": "A" * 64}]),
        manifest_json(files=[{"path": "x", "size": 1, "sha256": SHA}] * 2),
        manifest_json(files=[{"path": "x", "size": 1, "sha256": SHA, "extra": 1}]),
        manifest_json(kind="file"),
        "[]", "{", b"\xff",
    ]
    for text in bad:
        with pytest.raises(ValueError):
            parse_manifest(text)


def test_uploader_output_folds_progress_done_and_errors() -> None:
    r = parse_upload_output("noise\n@@jt-upload progress 5 10\n@@jt-upload progress x y\n")
    assert (r.sent, r.total, r.done_uri) == (5, 10, None)
    r = parse_upload_output("@@jt-upload done 4 s3://b-1/k/\n", r)
    assert (r.done_uri, r.sent_this_run, r.sent) == ("s3://b-1/k/", 4, 10)
    assert parse_upload_output("@@jt-upload error bucket x does not exist").error == "bucket x does not exist"
    assert parse_upload_output("@@jt-upload busy another").busy
    assert progress_text(5, 10) == "50% (0.0/0.0 MB)" and progress_text(0, 0).startswith("100%")


def test_kernel_credentials_name_what_is_missing_never_a_value() -> None:
    got = kernel_credentials({"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s3cr3t", "OTHER": "x"})
    assert got == {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s3cr3t"}
    with pytest.raises(ValueError) as err:
        kernel_credentials({"AWS_ACCESS_KEY_ID": "k-visible"})
    assert "AWS_SECRET_ACCESS_KEY is not set" in str(err.value) and "k-visible" not in str(err.value)


# --- seeded fuzz ---------------------------------------------------------------------------------

ALPHABET = "abcz09.-_/:@=+,;$ ~\\'\"\n\x00é..//AZ"
PIECES = ["s3://", "s3:/", "bucket", "team-ckpt", "xn--", "..", ".", "/", "//", "a" * 70, "k" * 300,
          "-s3alias", "192.168.0.1", "%2e", "\u2028", "\udc80", "ckpt-000100", "?", "#"]


def fuzz_text(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(0, 8)):
        if rng.random() < 0.5:
            parts.append(rng.choice(PIECES))
        else:
            parts.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 6))))
    return "".join(parts)


def test_fuzz_uri_parser_gives_valid_uris_or_value_errors() -> None:
    rng = random.Random(SEED)
    parsed = 0
    for _ in range(5000):
        text = fuzz_text(rng)
        if rng.random() < 0.5:
            text = "s3://team-ckpt/" + text
        try:
            uri = parse_uri(text)
        except ValueError as exc:
            assert str(exc) and "\n" not in str(exc)
            continue
        parsed += 1
        assert bucket_problem(uri.bucket) is None and parse_uri(str(uri)) == uri
        assert not any(c in str(uri) for c in " ;$'\"\\\n\x00") and "//" not in str(uri)[5:]
    assert parsed > 100  # the fuzz reached the accepting paths too


def test_fuzz_manifest_parser_gives_manifests_or_value_errors() -> None:
    rng = random.Random(SEED + 1)
    base = json.loads(manifest_json())
    values: list[object] = [None, True, -1, 0, 3, 2**70, 1.5, "", "x", SHA, "A" * 64, [], {}, "../a",
                            "a//b", "s3://b-1/x", MANIFEST_FORMAT, "dir", "file"]
    accepted = 0
    for _ in range(3000):
        data = json.loads(json.dumps(base))
        for _ in range(rng.randint(1, 3)):
            target = data if rng.random() < 0.4 else data["files"][0] if data.get("files") and isinstance(
                data["files"], list) and isinstance(data["files"][0], dict) else data
            key = rng.choice(["format", "uri", "kind", "source", "files", "path", "size", "sha256", "x"])
            if rng.random() < 0.2:
                target.pop(key, None)
            else:
                target[key] = rng.choice([*values, fuzz_text(rng)])
        text = json.dumps(data)
        if rng.random() < 0.1:
            text = text[: rng.randint(0, len(text))]
        try:
            m = parse_manifest(text)
        except ValueError as exc:
            assert str(exc) and "\n" not in str(exc)
            continue
        accepted += 1
        assert parse_manifest(m.to_json()) == m
    assert accepted > 10


def test_fuzz_uploader_output_and_object_store_never_raise_otherwise() -> None:
    rng = random.Random(SEED + 2)
    words = ["@@jt-upload", "progress", "done", "error", "busy", "1", "99999999999999999999999", "-3",
             "s3://b-1/k", " ", "\n", "x"]
    for _ in range(3000):
        text = "".join(rng.choice(words) + rng.choice([" ", "", "\n"]) for _ in range(rng.randint(0, 12)))
        r = parse_upload_output(text + fuzz_text(rng))
        assert r.sent >= 0 and r.total >= 0 and (r.error is None or "\n" not in r.error)
        value = {rng.choice(["bucket", "prefix", "endpoint_url", "region", "credentials",
                             "credentials_secret", "allow_insecure_endpoint", "x"]):
                 rng.choice([fuzz_text(rng), "team-ckpt", 3, None, True, "http://h:1"])
                 for _ in range(rng.randint(0, 4))}
        try:
            parse_object_store(value, rng.choice(["slurm", "local", "kubernetes", None]))
        except ValueError as exc:
            key, message = exc.args[0]
            assert isinstance(key, str) and message and "\n" not in message


def test_a_plain_http_endpoint_needs_the_profiles_opt_in() -> None:
    with pytest.raises(ValueError) as err:
        parse_object_store({"bucket": "b-1", "endpoint_url": "http://127.0.0.1:9000"}, "local")
    key, message = err.value.args[0]
    assert key == "endpoint_url" and "unencrypted" in message and "allow_insecure_endpoint: true" in message
    ok = parse_object_store({"bucket": "b-1", "endpoint_url": "http://127.0.0.1:9000",
                             "allow_insecure_endpoint": True}, "kubernetes")
    assert ok.endpoint_url == "http://127.0.0.1:9000" and ok.allow_insecure_endpoint
    assert parse_object_store({"bucket": "b-1", "endpoint_url": "https://s3.lab"}, "local").endpoint_url
