"""The API without a cluster: profiles without secrets, JSON errors with the right status codes,
and seeded fuzz of the query and body parsers (only 4xx JSON errors, never a 500)."""

from __future__ import annotations

import contextlib
import json
import random
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_tiers.config.registry import JobRecord, Registry
from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.faces.server import params
from tests.server.util import body

SEED = 20261202


@pytest.fixture
def secret_profiles(tiers_config: Any, tmp_path: Path) -> dict[str, str]:
    """A slurm profile with an identity file and env values, a kubernetes one with a kubeconfig
    holding a token; returns every secret (and the paths that lead to them)."""
    key = tmp_path / "id_ed25519_tiers_test"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nS3CR3T-KEY-MATERIAL-4f9a\n"
                   "-----END OPENSSH PRIVATE KEY-----\n")
    kubeconfig = tmp_path / "kubeconfig-tiers-test.yaml"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: prod\n"
        "clusters: [{name: c, cluster: {server: 'https://10.0.0.1:6443'}}]\n"
        "users: [{name: u, user: {token: kube-bearer-token-77e1}}]\n"
        "contexts: [{name: prod, context: {cluster: c, user: u, namespace: team}}]\n")
    tiers_config({
        "default_profile": "hpc",
        "profiles": {
            "hpc": {"tier": "slurm", "host": "login.example.org", "user": "alice",
                    "identity_file": str(key), "env": {"WANDB_API_KEY": "wandb-secret-value-91c3",
                                                       "HF_TOKEN": "hf_secret_token_0b7d"}},
            "serving": {"tier": "kubernetes", "kubeconfig": str(kubeconfig), "context": "prod",
                        "namespace": "team-llm", "env": {"OPENAI_KEY": "sk-secret-5d2e"}},
            "laptop": {"tier": "local"},
        },
    })
    return {"key path": str(key), "key": "S3CR3T-KEY-MATERIAL-4f9a", "wandb": "wandb-secret-value-91c3",
            "hf": "hf_secret_token_0b7d", "kubeconfig path": str(kubeconfig),
            "kube token": "kube-bearer-token-77e1", "openai": "sk-secret-5d2e"}


async def test_profiles_list_names_tiers_and_hosts_but_no_secret(jp_fetch: Any,
                                                                 secret_profiles: dict[str, str]) -> None:
    response = await jp_fetch("jupyter-tiers", "api", "profiles")
    data = body(response)
    assert data["default"] == "hpc"
    by_name = {p["name"]: p for p in data["profiles"]}
    assert by_name["hpc"] == {"name": "hpc", "tier": "slurm", "host": "login.example.org",
                              "where": "login.example.org", "default": True, "description": ""}
    assert by_name["serving"]["tier"] == "kubernetes" and by_name["serving"]["host"] == "prod"
    assert by_name["laptop"]["host"] is None and not by_name["laptop"]["default"]
    text = response.body.decode()
    for what, secret in secret_profiles.items():
        assert secret not in text, f"the {what} leaked into GET profiles"
    assert "identity_file" not in text and "env" not in json.loads(text)["profiles"][0]


def _add(key_profile: str, job_id: str, kind: str = "job", **fields: Any) -> JobRecord:
    rec = JobRecord(profile=key_profile, tier="kubernetes" if kind == "service" else "slurm",
                    job_id=job_id, name=f"n-{job_id}", kind=kind, world_size=0 if kind == "service" else 2,
                    state="READY" if kind == "service" else "RUNNING", **fields)
    Registry().add(rec)
    return rec


async def _error(jp_fetch: Any, *parts: str, **kwargs: Any) -> tuple[int, str]:
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch(*parts, **kwargs)
    response = err.value.response
    assert response is not None and response.headers["Content-Type"].startswith("application/json")
    message = body(response)["error"]
    assert isinstance(message, str) and message and "Traceback" not in message
    return err.value.code, message


async def test_json_errors_with_status_codes(jp_fetch: Any, tiers_config: Any) -> None:
    _add("far", "41")
    _add("far", "svc-a", kind="service")
    api = ("jupyter-tiers", "api", "jobs")
    code, message = await _error(jp_fetch, *api, "far", "999")
    assert code == 404 and "999" in message
    code, message = await _error(jp_fetch, *api, "far", "svc-a", "cancel", method="POST", body=b"")
    assert code == 409 and "service" in message
    code, message = await _error(jp_fetch, *api, "far", "41", "scale", method="POST",
                                 body=json.dumps({"replicas": 2}))
    assert code == 409 and "job" in message
    code, message = await _error(jp_fetch, *api, "far", "41", method="DELETE")
    assert code == 409
    for bad in ({"replicas": -1}, {"replicas": 1.5}, {"replicas": True}, {"replicas": "3"},
                {"replicas": 1001}, {}, [], "x", {"replicas": 1, "force": True}):
        code, message = await _error(jp_fetch, *api, "far", "svc-a", "scale", method="POST",
                                     body=json.dumps(bad))
        assert code == 400 and ("replicas" in message or "body" in message or "force" in message), bad
    code, message = await _error(jp_fetch, *api, "far", "41", "logs", params={"offset": "-1"})
    assert code == 400 and message.startswith("offset")
    code, message = await _error(jp_fetch, *api, "far", "41", "logs", params={"rank": "1", "pod": "p"})
    assert code == 400 and "not both" in message
    code, message = await _error(jp_fetch, *api, "far", "41", params={"refresh": "maybe"})
    assert code == 400 and message.startswith("refresh") and "1 or 0" in message
    # The job exists but its profile does not (any more): 404 naming the profile.
    code, message = await _error(jp_fetch, *api, "far", "41")
    assert code == 404 and "far" in message


async def test_list_orphans_the_items_of_a_profile_that_no_longer_exists(jp_fetch: Any,
                                                                         tiers_config: Any) -> None:
    """Issue 41 item 3: a job whose profile was removed kept its recorded RUNNING (with a red line
    at the top); nobody can check it, so it reads UNKNOWN saying why, offers only Forget, and no
    cluster is asked for it (no error line)."""
    _add("gone", "7")
    data = body(await jp_fetch("jupyter-tiers", "api", "jobs"))
    assert [i["key"] for i in data["items"]] == ["gone/7"]
    item = data["items"][0]
    assert item["state"] == "UNKNOWN" and item["orphan"] is True and item["terminal"] is False
    assert item["size"] == "2 ranks" and "profile 'gone' no longer exists" in item["reason"]
    assert data["errors"] == []
    cached = body(await jp_fetch("jupyter-tiers", "api", "jobs", params={"refresh": "0"}))
    assert [i["key"] for i in cached["items"]] == ["gone/7"]
    # The revisions the sidebar merges by: a refreshed answer is as of the hub's revision when
    # the clusters were asked (every item too); a cached one carries each item's own.
    assert isinstance(data["rev"], int) and item["rev"] == data["rev"]
    assert data["rev"] <= cached["rev"] and cached["items"][0]["rev"] <= cached["rev"]


# --- seeded fuzz -------------------------------------------------------------------------------

_PIECES = ["0", "1", "-1", "10", "99999999999999999", "1e3", "abc", "", " ", "%00", "\u00e9", "\ud800",
           "rank", "pod", "offset", "limit", "refresh", "true", "no", "../..", "a" * 300, "NaN", "0x10",
           "web-0", "1.5", "\n"]


def _random_text(rng: random.Random) -> str:
    return "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 3)))


def _random_query(rng: random.Random) -> dict[str, list[bytes]]:
    names = ["rank", "pod", "offset", "limit", "backlog", "refresh", "profile", "kind", _random_text(rng)]
    out: dict[str, list[bytes]] = {}
    for _ in range(rng.randint(0, 4)):
        values = [_random_text(rng).encode("utf-8", "surrogatepass") for _ in range(rng.randint(1, 2))]
        out[rng.choice(names)] = values
    return out


def test_parsers_fuzz_only_raise_spec_errors() -> None:
    rng = random.Random(SEED)
    for _ in range(3000):
        query = _random_query(rng)
        for parse in (params.list_query, params.log_query,
                      lambda q: params.log_query(q, with_limit=False)):
            with contextlib.suppress(SpecError):
                parse(query)
        raw = rng.choice([_random_text(rng).encode("utf-8", "surrogatepass"),
                          json.dumps({"replicas": rng.choice([rng.randint(-5, 2000), _random_text(rng),
                                                              None, [], 1.0])}).encode(),
                          bytes(rng.randrange(256) for _ in range(rng.randint(0, 20)))])
        try:
            replicas = params.scale_body(raw)
            assert 0 <= replicas <= 1000
        except SpecError:
            pass
        for text in (_random_text(rng), _random_text(rng)):
            with contextlib.suppress(SpecError):
                assert params.segment(text, "id") == text


async def test_http_fuzz_gets_only_4xx_json_errors(jp_fetch: Any, tiers_config: Any) -> None:
    _add("far", "41")
    _add("far", "svc-a", kind="service")
    rng = random.Random(SEED)
    codes: dict[int, int] = {}
    for _ in range(150):
        target = rng.choice([["far", "41"], ["far", "svc-a"], ["far", "404"], ["nope", "1"]])
        query = {k.encode("utf-8", "replace").decode(): v[0].decode("utf-8", "replace")
                 for k, v in _random_query(rng).items()}
        verb = rng.choice(["logs", "detail", "scale", "cancel", "restart", "delete", "list"])
        kwargs: dict[str, Any] = {"params": query}
        parts = ["jupyter-tiers", "api", "jobs", *target]
        if verb == "logs":
            parts.append("logs")
        elif verb in ("scale", "cancel", "restart"):
            parts.append(verb)
            kwargs.update(method="POST", body=rng.choice([_random_text(rng), json.dumps(
                {"replicas": rng.choice([-1, 1001, "2", None, 2.5])})]).encode("utf-8", "surrogatepass"))
        elif verb == "delete":
            kwargs["method"] = "DELETE"
        elif verb == "list":
            parts = ["jupyter-tiers", "api", "jobs"]
            query["refresh"] = "0" if rng.random() < 0.5 else query.get("refresh", "0")
        try:
            response = await jp_fetch(*parts, **kwargs)
            code = response.code
            assert verb == "list", (parts, query, code)  # every other request here is refused
        except HTTPClientError as exc:
            code = exc.code
            assert exc.response is not None
            assert 400 <= code < 500, (parts, query, code, exc.response.body)
            assert body(exc.response)["error"]
        codes[code] = codes.get(code, 0) + 1
    assert codes.get(400) and codes.get(404) and codes.get(409), codes


async def test_an_unreachable_cluster_is_a_502_and_a_bad_stream_query_a_400(
        jp_fetch: Any, jp_ws_fetch: Any, tiers_config: Any) -> None:
    # 192.0.2.1 is TEST-NET-1: nothing answers there (the transport retries with back-off first).
    tiers_config({"profiles": {"far": {"tier": "slurm", "host": "192.0.2.1", "user": "nobody",
                                       "connect_timeout": 1}}})
    _add("far", "41")
    code, message = await _error(jp_fetch, "jupyter-tiers", "api", "jobs", "far", "41")
    assert code == 502 and "192.0.2.1" in message
    for query, word in (({"rank": "abc"}, "rank"), ({"pod": "web-0"}, "pod"), ({"offset": "-3"}, "offset")):
        with pytest.raises(HTTPClientError) as err:
            await jp_ws_fetch("jupyter-tiers", "api", "jobs", "far", "41", "logs", "stream", params=query)
        assert err.value.code == 400, query
        assert err.value.response is not None and body(err.value.response)["error"].startswith(word)
    with pytest.raises(HTTPClientError) as err:
        await jp_ws_fetch("jupyter-tiers", "api", "jobs", "far", "999", "logs", "stream")
    assert err.value.code == 404


# --- hardening round 3 (issue 20 items 8 and 9) ---------------------------------------------------


def test_a_deeply_nested_scale_body_is_a_400_not_a_recursion_error() -> None:
    for deep in (b"[" * 4000, b"[" * 2000 + b"]" * 2000,
                 b'{"replicas": ' + b"[" * 1500 + b"1" + b"]" * 1500 + b"}",
                 b'{"a":' * 600 + b"1" + b"}" * 600, b"[" * 9):
        with pytest.raises(SpecError, match="nested too deeply"):
            params.scale_body(deep)
    # Brackets inside strings are text, not nesting; a shallow body still parses.
    assert params.nesting_depth('{"x": "[[[[[[[[[[[[\\"[[[["}') == 1
    assert params.scale_body(b'{"replicas": 3}') == 3


def test_nested_bodies_fuzz_only_raise_spec_errors() -> None:
    rng = random.Random(SEED + 8)
    for _ in range(2000):
        depth = rng.randint(0, 2500)
        opener = rng.choice(["[", '{"a":', '{"replicas":', "[1,", '["]",'])
        closer = {"[": "]", '{"a":': "}", '{"replicas":': "}", "[1,": "]", '["]",': "]"}[opener]
        core = rng.choice(["1", '"x"', "null", "", "[", "\\", '"'])
        raw = (opener * depth + core + closer * rng.randint(0, depth)).encode()[:rng.choice([4096, 5000])]
        with contextlib.suppress(SpecError):
            assert 0 <= params.scale_body(raw) <= 1000


async def test_http_nested_scale_body_is_a_400(jp_fetch: Any, tiers_config: Any) -> None:
    _add("far", "svc-a", kind="service")
    code, message = await _error(jp_fetch, "jupyter-tiers", "api", "jobs", "far", "svc-a", "scale",
                                 method="POST", body=b"[" * 4000)
    assert code == 400 and message.startswith("body") and "nested too deeply" in message


async def test_error_messages_are_shown_once_escaped_and_name_no_server_path(
        jp_fetch: Any, tiers_config: Any, tmp_path: Path) -> None:
    tiers_config({"default_profile": "laptop", "profiles": {"laptop": {"tier": "local"}}})
    # "%tiers jobs" in a service-layer message stays one '%' (tornado's %-formatting, not ours).
    code, message = await _error(jp_fetch, "jupyter-tiers", "api", "history", params={"profile": "laptop"})
    assert code == 400 and "%tiers jobs" in message and "%%" not in message, message
    registry = str(Registry().path)
    code, message = await _error(jp_fetch, "jupyter-tiers", "api", "jobs", "laptop", "999")
    assert code == 404 and message == "no job 'laptop/999' in the registry", message
    for parts in (("jobs", "laptop", "999", "logs"), ("jobs", "laptop", "999", "cancel")):
        kwargs: dict[str, Any] = {"method": "POST", "body": b""} if parts[-1] == "cancel" else {}
        code, message = await _error(jp_fetch, "jupyter-tiers", "api", *parts, **kwargs)
        assert code == 404 and registry not in message and str(tmp_path) not in message, message


def test_public_text_drops_server_paths_but_keeps_urls_and_ratios() -> None:
    from jupyter_tiers.faces.server.handlers import public_text

    assert public_text("no job '9' in the registry (/root/.local/share/jupyter/tiers/registry.sqlite)") \
        == "no job '9' in the registry"
    assert public_text("the local workdir /tmp/x/work belongs to uid 5") == \
        "the local workdir …/work belongs to uid 5"
    for kept in ("GET http://127.0.0.1:8888/api/v1/x failed", "1/2 ready", "probe /health failed",
                 "use %%k8s_serve", "pods/log forbidden"):
        assert public_text(kept) == kept
    rng = random.Random(SEED + 9)
    words = ["no", "job", "'9'", "%%tiers", "1/2", "http://h:1/a/b", "/srv/secret/registry.sqlite",
             "/srv/secret/", "(/srv/secret/w)", "'/srv/secret/x'", "/srv/secret/a b", "é", "…"]
    for _ in range(2000):
        text = rng.choice([" ", " (", ": "]).join(rng.choice(words) for _ in range(rng.randint(0, 8)))
        out = public_text(text)
        assert "/srv/secret" not in out, (text, out)
        assert out.count("http://h:1/a/b") == text.count("http://h:1/a/b"), (text, out)


async def test_a_broken_config_is_reported_without_its_path(jp_fetch: Any, tiers_config: Any,
                                                            tmp_path: Path) -> None:
    path = tiers_config({"profiles": {"laptop": {"tier": "local"}}})
    path.write_text("profiles: [unclosed\n")
    for parts in (("profiles",), ("history",)):
        code, message = await _error(jp_fetch, "jupyter-tiers", "api", *parts)
        assert code == 400 and str(tmp_path) not in message, (parts, message)
        assert "tiers.yaml" in message, (parts, message)  # the file is still named


async def test_profile_errors_in_a_listing_name_no_server_path(jp_fetch: Any, tiers_config: Any,
                                                               tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "kubeconfig.yaml"
    tiers_config({"profiles": {"kube": {"tier": "kubernetes", "kubeconfig": str(missing)}}})
    _add("kube", "web", kind="service")
    data = body(await jp_fetch("jupyter-tiers", "api", "jobs"))
    assert [e["profile"] for e in data["errors"]] == ["kube"], data
    message = data["errors"][0]["message"]
    assert str(tmp_path) not in message and "kubeconfig" in message, message
