"""``POST profiles/{name}/doctor``: the doctor's JSON report through the server extension (a local
profile: no cluster needed), the Role suggestion flag passed on, an unknown profile a 404. The
refusal without a login is checked for every route by test_auth.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from tests.server.util import body


async def test_doctor_of_a_local_profile(jp_fetch: Any, tiers_config: Any, tmp_path: Path) -> None:
    workdir = tmp_path / "jobs"
    workdir.mkdir(mode=0o700)
    tiers_config({"profiles": {"lab": {"tier": "local", "workdir": str(workdir)}}})
    response = await jp_fetch("jupyter-tiers", "api", "profiles", "lab", "doctor", method="POST", body=b"")
    data = body(response)
    assert data["ok"] is True and [p["profile"] for p in data["profiles"]] == ["lab"]
    checks = {c["name"]: c for c in data["profiles"][0]["checks"]}
    assert checks["workdir"]["status"] == "OK" and str(workdir) in checks["workdir"]["detail"]
    assert set(checks) >= {"workdir", "python", "ports"}


async def test_doctor_of_an_unknown_profile_is_a_404(jp_fetch: Any, tiers_config: Any) -> None:
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("jupyter-tiers", "api", "profiles", "nope", "doctor", method="POST", body=b"")
    assert err.value.code == 404 and err.value.response is not None
    assert body(err.value.response)["error"] == "no profile 'nope'"


async def test_a_failed_check_is_still_a_report(jp_fetch: Any, tiers_config: Any, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    tiers_config({"profiles": {"open": {"tier": "local", "workdir": str(shared)}}})
    data = body(await jp_fetch("jupyter-tiers", "api", "profiles", "open", "doctor", method="POST", body=b"",
                               params={"suggest_role": "1"}))
    assert data["ok"] is False
    workdir = next(c for c in data["profiles"][0]["checks"] if c["name"] == "workdir")
    assert workdir["status"] == "FAIL" and "mode 0777" in workdir["detail"] and workdir["fix"]


async def test_the_doctor_is_a_post_with_the_xsrf_check(jp_serverapp: Any, http_server_client: Any,
                                                       jp_base_url: str, tiers_config: Any,
                                                       tmp_path: Path) -> None:
    """Issue 26 §4: the checks act (log in, write an object, run the profile's python), so a page
    that makes the browser send a request must not start them: a GET is refused, and a
    cookie-authenticated POST needs the XSRF header, as every other mutation does."""
    workdir = tmp_path / "jobs"
    workdir.mkdir(mode=0o700)
    tiers_config({"profiles": {"lab": {"tier": "local", "workdir": str(workdir)}}})
    token = jp_serverapp.identity_provider.token
    cookies: dict[str, str] = {}
    for url in (f"{jp_base_url}login", f"{jp_base_url}jupyter-tiers/api/profiles?token={token}"):
        page = await http_server_client.fetch(url, raise_error=False, follow_redirects=False)
        assert page.code == 200, url
        for header in page.headers.get_list("Set-Cookie"):
            name, _, rest = header.partition("=")
            cookies[name] = rest.split(";", 1)[0]
    cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
    url = f"{jp_base_url}jupyter-tiers/api/profiles/lab/doctor"
    got = await http_server_client.fetch(url, headers={"Cookie": cookie}, raise_error=False)
    assert got.code == 405, got.body
    with_token = await http_server_client.fetch(url, headers={"Authorization": f"token {token}"},
                                                raise_error=False)
    assert with_token.code == 405
    refused = await http_server_client.fetch(url, method="POST", body=b"", headers={"Cookie": cookie},
                                             raise_error=False)
    assert refused.code == 403 and "_xsrf" in body(refused)["error"]
    passed = await http_server_client.fetch(url, method="POST", body=b"", raise_error=False,
                                            headers={"Cookie": cookie, "X-XSRFToken": cookies["_xsrf"]})
    assert passed.code == 200 and body(passed)["profiles"][0]["profile"] == "lab"
