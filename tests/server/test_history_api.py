"""``GET history`` (Slurm accounting through the server extension): refused without a login, bad
query values a 400 naming the value, a local profile a 400, an unknown one a 404, a cluster without
accounting a 409 saying so; seeded fuzz of the query parser; and on the real Slurm test cluster a
history holding a job of ours and one submitted with plain sbatch over SSH, told apart."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_tiers import api
from jupyter_tiers.app import actions
from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.core.model import JobState
from jupyter_tiers.faces.server import params
from jupyter_tiers.slurm.history import MAX_DAYS, MAX_LIMIT, MAX_TAIL, NO_ACCOUNTING_MESSAGE, STATES
from jupyter_tiers.slurm.tier import SlurmTier
from jupyter_tiers.transport.exchange import CommandResult
from tests.cluster.conftest import profile_yaml
from tests.cluster.test_history import _wait_accounted, plain_sbatch_job  # noqa: F401 (a fixture)
from tests.server.util import body

HISTORY = ("jupyter-tiers", "api", "history")
SEED = 20261203


async def _error(jp_fetch: Any, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch(*HISTORY, **kwargs)
    response = err.value.response
    assert response is not None and response.headers["Content-Type"].startswith("application/json")
    data = body(response)
    assert isinstance(data["error"], str) and data["error"] and "Traceback" not in data["error"]
    return err.value.code, data


async def test_history_refuses_a_request_without_a_token(jp_serverapp: Any, http_server_client: Any,
                                                         jp_base_url: str, tiers_config: Any) -> None:
    for headers in ({}, {"Authorization": "token not-the-token"}):
        response = await http_server_client.fetch(f"{jp_base_url}jupyter-tiers/api/history?days=1",
                                                  headers=headers, raise_error=False)
        assert response.code == 403, headers
        assert "error" in body(response)


async def test_bad_query_values_are_a_400_naming_them(jp_fetch: Any, tiers_config: Any) -> None:
    # 192.0.2.1 (TEST-NET-1) answers nothing: every refusal below happens before any connection.
    tiers_config({"profiles": {"far": {"tier": "slurm", "host": "192.0.2.1", "user": "nobody",
                                       "connect_timeout": 1}}})
    cases = [
        ({"days": "0"}, "days", "1 to 366"), ({"days": "367"}, "days", "1 to 366"),
        ({"days": "abc"}, "days", "whole number"), ({"limit": "0"}, "limit", "1 to 10000"),
        ({"user": "-a"}, "user", "not a user name"), ({"user": "x;id"}, "user", "not a user name"),
        ({"state": "BOGUS"}, "state", "COMPLETED"), ({"state": "F,nope"}, "state", "not a job state"),
        ({"job": "12;rm"}, "job", "not a Slurm job id"), ({"tail": "5"}, "tail", "job=ID"),
        ({"job": "12", "tail": "-1"}, "tail", "whole number"), ({"profile": "../x"}, "profile", "letters"),
    ]
    for query, field, words in cases:
        code, data = await _error(jp_fetch, params={"profile": "far", **query})
        assert code == 400, query
        assert data["error"].startswith(f"{field}: ") and words in data["error"], (query, data)


async def test_a_repeated_value_is_a_400(jp_serverapp: Any, http_server_client: Any, jp_base_url: str,
                                         tiers_config: Any) -> None:
    token = jp_serverapp.identity_provider.token
    response = await http_server_client.fetch(
        f"{jp_base_url}jupyter-tiers/api/history?days=1&days=2",
        headers={"Authorization": f"token {token}"}, raise_error=False)
    assert response.code == 400 and body(response)["error"] == "days: give it once"


async def test_a_local_profile_is_a_400_and_an_unknown_one_a_404(jp_fetch: Any, tiers_config: Any) -> None:
    tiers_config({"default_profile": "laptop", "profiles": {"laptop": {"tier": "local"}}})
    code, data = await _error(jp_fetch, params={"days": "1"})  # the default profile
    assert code == 400 and "'laptop' is a local tier" in data["error"] and "Slurm" in data["error"]
    code, data = await _error(jp_fetch, params={"profile": "nowhere"})
    assert code == 404 and "nowhere" in data["error"]


class _NoAccounting:
    """A transport answering sacct as a Slurm without accounting storage does (exit 1 and this
    stderr, seen on Slurm 22.05 with AccountingStorageType=accounting_storage/none)."""

    def run(self, argv: Any, stdin: bytes = b"", check: bool = True, timeout: Any = None) -> CommandResult:
        return CommandResult(tuple(argv), 1, b"", b"sacct: error: Slurm accounting storage is disabled\n")

    def close(self) -> None:
        pass


async def test_accounting_off_is_a_409_saying_so(jp_fetch: Any, tiers_config: Any, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    tiers_config({"profiles": {"box": {"tier": "slurm", "host": "h"}}})
    profile = Profile(name="box", tier="slurm", settings={"host": "h", "workdir": "~/jt"})
    tier = SlurmTier(profile, Registry(tmp_path / "r.sqlite"), transport=_NoAccounting())  # type: ignore[arg-type]
    monkeypatch.setattr(actions, "_connect", lambda name, kind="batch": tier)
    code, data = await _error(jp_fetch, params={"profile": "box", "days": "2"})
    assert code == 409 and data == {"error": NO_ACCOUNTING_MESSAGE, "accounting": False}
    assert "accounting is off" in data["error"]


# --- seeded fuzz of the query parser -------------------------------------------------------------

_PIECES = ["0", "1", "7", "-1", "366", "367", "10000", "10001", "99999999999999", "1e3", "abc", "", " ",
           "all", "root", "-a", "x;id", "$(id)", "F", "FAILED", "to", "CD,CA", "bogus", "12", "12_3",
           "12_", "box", "../", "\u00e9", "\ud800", "a" * 300, ",", "\n"]


def _random_query(rng: random.Random) -> dict[str, list[bytes]]:
    names = ["profile", "days", "user", "state", "limit", "job", "tail", rng.choice(_PIECES)]
    out: dict[str, list[bytes]] = {}
    for _ in range(rng.randint(0, 6)):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 3)))
        values = [text.encode("utf-8", "surrogatepass") for _ in range(rng.choice([1, 1, 1, 2]))]
        out[rng.choice(names)] = values
    return out


def test_history_query_fuzz_only_spec_errors_and_bounded_values() -> None:
    rng = random.Random(SEED)
    accepted = refused = 0
    for _ in range(5000):
        query = _random_query(rng)
        try:
            q = params.history_query(query)
        except SpecError as exc:
            assert str(exc) and "\n" not in str(exc)[:200], query
            refused += 1
            continue
        accepted += 1
        assert 1 <= q.days <= MAX_DAYS and 1 <= q.limit <= MAX_LIMIT
        assert all(s in STATES for s in q.states) and list(q.states) == sorted(set(q.states))
        assert q.user is None or (q.user[0] != "-" and q.user.replace("_", "a").replace(".", "a")
                                  .replace("-", "a").isalnum())
        assert q.job is None or q.job.replace("_", "").isdigit()
        assert q.tail is None or (q.job is not None and 0 <= q.tail <= MAX_TAIL)
        assert q.profile is None or params.segment(q.profile, "profile") == q.profile
    assert accepted > 100 and refused > 100, (accepted, refused)


# --- on the real Slurm test cluster ----------------------------------------------------------------


@pytest.fixture
def box(cluster_env: dict[str, str], tiers_config: Any) -> Iterator[SlurmTier]:
    """The ``box`` profile (the test cluster) as the only profile the server sees."""
    path: Path = tiers_config({"profiles": {}})
    path.write_text(profile_yaml(cluster_env))
    tier = api.connect("box")
    assert isinstance(tier, SlurmTier)
    yield tier
    for rec in tier.registry.list(limit=1000):
        with contextlib.suppress(Exception):
            tier.cancel(rec)


async def _history_with(jp_fetch: Any, ids: set[str], **query: str) -> dict[str, Any]:
    """``GET history`` once it lists ``ids``. slurmdbd answers ``sacct -j ID`` about a job that
    just ended a second or two before a time-window query (-S/-E) lists it (its Eligible time is
    still Unknown), so this polls, within a bound."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 180
    while True:
        data: dict[str, Any] = body(await jp_fetch(*HISTORY, params=query))
        if ids <= {r["job_id"] for r in data["rows"]}:
            return data
        if loop.time() > deadline:
            pytest.fail(f"GET history never listed {sorted(ids)}: {[r['job_id'] for r in data['rows'][:20]]}")
        await asyncio.sleep(1)


@pytest.mark.cluster
@pytest.mark.slurm_beside
async def test_history_has_ours_and_a_plain_sbatch_job(jp_fetch: Any, box: SlurmTier,
                                                       plain_sbatch_job: tuple[str, str]) -> None:  # noqa: F811
    foreign_id, workdir = plain_sbatch_job
    job = box.submit(box.make_spec("print('step=1 loss=0.5', flush=True)\n", name="hist-api", nodes=2))
    assert job.wait(timeout=180).state is JobState.COMPLETED
    _wait_accounted(box, foreign_id)
    _wait_accounted(box, job.id)

    data = await _history_with(jp_fetch, {job.id, foreign_id}, profile="box", days="1", limit="10000")
    assert data["profile"] == "box" and data["days"] == 1 and data["user"] is None and data["output"] is None
    rows = {r["job_id"]: r for r in data["rows"]}
    ours, other = rows[job.id], rows[foreign_id]
    assert ours["ours"] is True and ours["key"] == f"box/{job.id}" and ours["name"] == "hist-api"
    assert ours["state"] == "COMPLETED" and ours["exit"] == "0" and ours["nodes"] == 2
    assert other["ours"] is False and other["key"] == "" and other["name"] == "plain-sbatch"
    assert other["state"] == "FAILED" and other["exit_code"] == 3 and other["exit"] == "3"
    assert other["nodes"] == 2 and other["workdir"] == workdir and other["max_rss"] >= 48 << 20
    assert other["elapsed_s"] >= 2 and other["nodelist"]

    # state filter (short codes too) and the one-job view with the foreign job's output, read-only
    failed = await _history_with(jp_fetch, {foreign_id}, profile="box", days="1", state="F", limit="10000")
    ids = {r["job_id"] for r in failed["rows"]}
    assert foreign_id in ids and job.id not in ids and failed["states"] == ["FAILED"]
    one = body(await jp_fetch(*HISTORY, params={"profile": "box", "job": foreign_id, "tail": "5"}))
    assert [r["job_id"] for r in one["rows"]] == [foreign_id]
    assert one["output_path"] == f"{workdir}/slurm-{foreign_id}.out"
    assert "hello from plain sbatch" in one["output"] and "step=7 loss=0.125" in one["output"]
    mine = body(await jp_fetch(*HISTORY, params={"profile": "box", "job": job.id, "tail": "5"}))
    assert mine["rows"][0]["ours"] is True and mine["output"] is None  # ours: the detail panel's log
