"""``GET profiles/{name}/doctor``: the doctor's JSON report through the server extension (a local
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
    response = await jp_fetch("jupyter-tiers", "api", "profiles", "lab", "doctor")
    data = body(response)
    assert data["ok"] is True and [p["profile"] for p in data["profiles"]] == ["lab"]
    checks = {c["name"]: c for c in data["profiles"][0]["checks"]}
    assert checks["workdir"]["status"] == "OK" and str(workdir) in checks["workdir"]["detail"]
    assert set(checks) >= {"workdir", "python", "ports"}


async def test_doctor_of_an_unknown_profile_is_a_404(jp_fetch: Any, tiers_config: Any) -> None:
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("jupyter-tiers", "api", "profiles", "nope", "doctor")
    assert err.value.code == 404 and err.value.response is not None
    assert body(err.value.response)["error"] == "no profile 'nope'"


async def test_a_failed_check_is_still_a_report(jp_fetch: Any, tiers_config: Any, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    tiers_config({"profiles": {"open": {"tier": "local", "workdir": str(shared)}}})
    data = body(await jp_fetch("jupyter-tiers", "api", "profiles", "open", "doctor",
                               params={"suggest_role": "1"}))
    assert data["ok"] is False
    workdir = next(c for c in data["profiles"][0]["checks"] if c["name"] == "workdir")
    assert workdir["status"] == "FAIL" and "mode 0777" in workdir["detail"] and workdir["fix"]
