"""Job history from Slurm accounting: the sacct command (values validated), the parser on real
sacct 22.05 output (steps folded in, arrays, a name with the delimiter's characters), accounting
off, jobs marked as ours, the %tiers history parser, and seeded fuzz of both parsers."""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest

from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import JobRecord, Registry
from jupyter_tiers.core.errors import SpecError, TiersError
from jupyter_tiers.faces import tiers_command
from jupyter_tiers.slurm.commands import unwrap_slurm
from jupyter_tiers.slurm.history import (
    DELIMITER,
    HISTORY_FIELDS,
    MAX_DAYS,
    NO_ACCOUNTING_MESSAGE,
    STATES,
    AccountingDisabled,
    HistoryQuery,
    format_bytes,
    format_history,
    history_argv,
    history_result,
    make_query,
    parse_history,
    parse_rss,
)
from jupyter_tiers.slurm.tier import SlurmTier
from jupyter_tiers.transport.exchange import CommandResult

# Recorded from the test cluster (Slurm 22.05.8): `sacct -n -P --delimiter='|#|' -j 2,3,4,293,296
# -o <HISTORY_FIELDS>`; 293 is a two-task array named "arr|pipe name" submitted with plain sbatch.
REAL = (Path(__file__).parent / "data" / "sacct_history.txt").read_text()

NO_ACCOUNTING_STDERR = "sacct: error: Slurm accounting storage is disabled\n"


def test_default_query_argv() -> None:
    argv = unwrap_slurm(history_argv(HistoryQuery()))
    assert argv == ["sacct", "-n", "-P", f"--delimiter={DELIMITER}", "-S", "now-7days", "-E", "now",
                    "-o", ",".join(HISTORY_FIELDS)]
    assert "-X" not in argv  # steps are needed for max RSS


def test_query_argv_with_user_states_and_all() -> None:
    q = make_query(days=30, user="alice", states="failed,TO", limit=5)
    argv = history_argv(q)
    assert argv[argv.index("-S") + 1] == "now-30days"
    assert argv[argv.index("-u") + 1] == "alice"
    assert argv[argv.index("-s") + 1] == "FAILED,TIMEOUT"
    everyone = history_argv(make_query(user="all", states=["OOM", "cd"]))
    assert "-a" in everyone and "-u" not in everyone
    assert everyone[everyone.index("-s") + 1] == "COMPLETED,OUT_OF_MEMORY"


@pytest.mark.parametrize("kwargs, field", [
    ({"days": 0}, "days"), ({"days": MAX_DAYS + 1}, "days"), ({"days": "7"}, "days"),
    ({"days": True}, "days"), ({"days": -3}, "days"),
    ({"user": "x;rm -rf ~"}, "user"), ({"user": "-a"}, "user"), ({"user": "a" * 33}, "user"),
    ({"user": "bob smith"}, "user"), ({"user": "$(id)"}, "user"), ({"user": ""}, "user"),
    ({"user": 5}, "user"),
    ({"states": "RUNNIN"}, "state"), ({"states": "FAILED;reboot"}, "state"), ({"states": 3}, "state"),
    ({"states": ["ok", 1]}, "state"),
    ({"limit": 0}, "limit"), ({"limit": 10**9}, "limit"),
])
def test_bad_values_never_reach_the_command(kwargs: dict, field: str) -> None:
    with pytest.raises(SpecError) as err:
        make_query(**kwargs)
    assert err.value.field == field
    assert len(str(err.value)) < 250 and "\n" not in str(err.value)


def test_states_list_names_every_choice() -> None:
    with pytest.raises(SpecError) as err:
        make_query(states="nope")
    assert all(s in str(err.value) for s in STATES)


def test_real_output_one_row_per_job_with_max_rss_from_steps() -> None:
    rows = parse_history(REAL)
    assert [r.job_id for r in rows] == ["296", "295", "293", "4", "3", "2"]  # newest first
    by_id = {r.job_id: r for r in rows}
    failed = by_id["3"]
    assert failed.state == "FAILED" and failed.exit_code == 9 and failed.signal is None
    assert failed.elapsed_s == 7 and failed.nodes == 2 and failed.nodelist == "node[1-2]"
    assert failed.max_rss == 16272 * 1024  # only step 3.0 reported one
    assert failed.user == "root" and failed.partition == "debug" and failed.workdir.startswith("/var/tmp/")
    assert by_id["4"].state == "CANCELLED"  # "CANCELLED by 0"
    assert by_id["2"].max_rss is None
    arr = by_id["295"]
    assert arr.display_id == "293_0" and arr.name == "arr|pipe name"  # the name stays whole
    assert arr.default_log == "/tmp/slurm-293_0.out" and arr.ref == "293_0"
    from dataclasses import replace

    assert replace(arr, display_id="293_[4-10%2]").ref == "295"  # a pending array's tasks
    assert by_id["293"].display_id == "293_1"


def test_accounting_off_is_one_clear_line() -> None:
    with pytest.raises(AccountingDisabled) as err:
        history_result(1, "", NO_ACCOUNTING_STDERR)
    assert str(err.value) == NO_ACCOUNTING_MESSAGE
    assert "accounting is off" in str(err.value) and "\n" not in str(err.value)


def test_other_sacct_errors_keep_sacct_words() -> None:
    # sacct reports an unknown user on stderr and exits 0.
    with pytest.raises(TiersError, match=r"^sacct: error: Invalid user id: nobody$"):
        history_result(0, "", "sacct: error: Invalid user id: nobody\n")
    with pytest.raises(TiersError, match="exited 1"):
        history_result(1, "", "")
    assert history_result(0, "", "") == []
    assert len(history_result(0, REAL, "")) == 6


def test_rss_and_bytes() -> None:
    assert parse_rss("16272K") == 16272 * 1024
    assert parse_rss("1.50G") == int(1.5 * 1024**3)
    assert parse_rss("0") == 0
    assert parse_rss("") is None and parse_rss("12Q") is None
    assert parse_rss("9" * 400 + "K") is None  # never an overflow
    assert format_bytes(16272 * 1024) == "15.9M"
    assert format_bytes(512) == "512B" and format_bytes(None) == "-"
    assert format_bytes(3 * 1024**4) == "3.0T"


def test_table_marks_who_submitted_and_shows_cluster_text_as_text() -> None:
    rows = parse_history(REAL.replace("arr|pipe name", "evil\x1b[2Jname\r"))
    from jupyter_tiers.slurm.history import mark_ours

    rows = mark_ours(rows, {"3": "box/3"})
    table = format_history(rows)
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["ID", "NAME", "USER", "STATE"]
    row3 = next(ln for ln in lines if ln.startswith("3 "))
    assert row3.rstrip().endswith("tiers") and "15.9M" in row3 and "FAILED" in row3
    assert next(ln for ln in lines if ln.startswith("2 ")).rstrip().endswith("other")
    assert "\x1b" not in table and "\r" not in table
    assert rows[[r.job_id for r in rows].index("3")].key == "box/3"


class _FakeTransport:
    """Answers sacct like a cluster would (stdout/stderr/exit), recording what was run."""

    def __init__(self, code: int, out: str, err: str) -> None:
        self.result = (code, out, err)
        self.argvs: list[list[str]] = []

    def run(self, argv, stdin=b"", check=True, timeout=None):
        self.argvs.append(list(argv))
        code, out, err = self.result
        return CommandResult(tuple(argv), code, out.encode(), err.encode())

    def close(self) -> None:
        pass


def _tier(tmp_path: Path, transport: _FakeTransport) -> SlurmTier:
    profile = Profile(name="box", tier="slurm", settings={"host": "h", "workdir": "~/jt"})
    return SlurmTier(profile, Registry(tmp_path / "r.sqlite"), transport=transport)  # type: ignore[arg-type]


def test_tier_history_one_query_marks_registry_jobs(tmp_path: Path) -> None:
    fake = _FakeTransport(0, REAL, "")
    tier = _tier(tmp_path, fake)
    tier.registry.add(JobRecord(profile="box", tier="slurm", job_id="3", name="notebook-job"))
    tier.registry.add(JobRecord(profile="other", tier="slurm", job_id="4", name="x"))
    rows = tier.history(make_query(days=2, limit=4))
    assert len(fake.argvs) == 1 and unwrap_slurm(fake.argvs[0])[0] == "sacct"
    assert [r.job_id for r in rows] == ["296", "295", "293", "4"]  # limit 4
    all_rows = tier.history(make_query(days=2))
    assert {r.job_id for r in all_rows if r.ours} == {"3"}  # job 4 is another profile's
    assert tier.accounting is True


def test_tier_history_with_accounting_off(tmp_path: Path) -> None:
    tier = _tier(tmp_path, _FakeTransport(1, "", NO_ACCOUNTING_STDERR))
    with pytest.raises(AccountingDisabled, match="accounting is off"):
        tier.history()
    assert tier.accounting is False  # the watcher will not ask sacct for purged jobs either


def test_history_command_prints_the_accounting_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from jupyter_tiers.app import actions
    from jupyter_tiers.faces.cli import main

    tier = _tier(tmp_path, _FakeTransport(1, "", NO_ACCOUNTING_STDERR))
    monkeypatch.setattr(actions, "_connect", lambda name, kind="batch": tier)
    assert main(["history", "-p", "box"]) == 1
    assert capsys.readouterr().err.strip() == f"jupyter tiers: {NO_ACCOUNTING_MESSAGE}"
    tier2 = _tier(tmp_path / "b", _FakeTransport(0, REAL, ""))
    (tmp_path / "b").mkdir(exist_ok=True)
    monkeypatch.setattr(actions, "_connect", lambda name, kind="batch": tier2)
    assert main(["history", "-p", "box", "--days", "3", "-s", "F"]) == 0
    out = capsys.readouterr().out
    assert "FAILED" in out and "not submitted by jupyter-tiers" in out
    assert main(["history", "-p", "box", "--days", "400"]) == 1
    assert "days: give a whole number of days from 1 to 366" in capsys.readouterr().err


_WORDS = ["history", "--days", "-d", "--user", "-u", "--state", "-s", "--limit", "--profile", "-p",
          "all", "root", "7", "0", "366", "367", "-1", "1e3", "FAILED", "F,TO", "bogus", "x;y", "$(id)",
          "--", "=", "--days=3", "--user=-a", "-h", "", " ", "ü", "9" * 30]


def _random_argv(rng: random.Random) -> list[str]:
    argv = ["history"]
    for _ in range(rng.randint(0, 8)):
        if rng.random() < 0.8:
            argv.append(rng.choice(_WORDS))
        else:
            argv.append("".join(rng.choice(string.printable) for _ in range(rng.randint(0, 12))))
    return argv


def test_fuzz_history_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    """Random command lines: a usage error, a SpecError, or a query whose sacct argv carries
    only validated values — never another exception."""
    rng = random.Random(20261202)
    valid = 0
    parser = tiers_command.build_parser()
    for _ in range(3000):
        argv = _random_argv(rng)
        try:
            args = parser.parse_args(argv)
        except (tiers_command.CommandUsage, tiers_command._HelpShown):
            continue
        try:
            query = make_query(days=args.days, user=args.user, states=args.state, limit=args.limit)
        except SpecError as exc:
            assert exc.field in ("days", "user", "state", "limit")
            continue
        valid += 1
        cmd = history_argv(query)
        assert 1 <= query.days <= MAX_DAYS and cmd[cmd.index("-S") + 1] == f"now-{query.days}days"
        if "-u" in cmd:
            user = cmd[cmd.index("-u") + 1]
            assert user[0] != "-" and all(c.isalnum() or c in "_.-" for c in user)
        if "-s" in cmd:
            assert set(cmd[cmd.index("-s") + 1].split(",")) <= set(STATES)
    capsys.readouterr()
    assert valid > 100  # the fuzz reached the command builder often


def test_fuzz_parser_never_raises() -> None:
    rng = random.Random(7)
    pieces = [DELIMITER, "|", "#", "123", ".batch", ".0", "_4", "K", "1.5G", "COMPLETED", "CANCELLED by 0",
              "0:15", "1-02:03:04", "node[1-2]", "\n", "", "ü", "\x00", "-", "None assigned",
              "9" * 40 + "K", "12_[4-10%2]"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 60)))
        rows = parse_history(text)
        for r in rows:
            assert r.job_id.isdigit()
        format_history(rows)
    lines = REAL.splitlines()
    for _ in range(300):  # real rows, cut and shuffled
        sample = rng.sample(lines, rng.randint(0, len(lines)))
        cut = "\n".join(ln[: rng.randint(0, len(ln))] if rng.random() < 0.3 else ln for ln in sample)
        assert len(parse_history(cut)) <= 6


def test_one_job_query_and_output_path_checks() -> None:
    from jupyter_tiers.slurm.history import check_job_ref, parse_tail_output, tail_output_argv

    argv = history_argv(make_query(job="293_1"))
    assert argv[argv.index("-j") + 1] == "293_1" and "-S" not in argv  # whenever it ran
    for bad in ("3;x", "-1", "12_", "_3", "1.0", "", " 1", "1\n"):
        with pytest.raises(SpecError, match="not a Slurm job id"):
            check_job_ref(bad)
    cmd = tail_output_argv("293_1", "/tmp/dir with space/slurm-3.out", 20)
    assert cmd[-3:] == ["293_1", "/tmp/dir with space/slurm-3.out", "20"]  # data as argv words
    for path in ("relative/slurm-3.out", "/a\nb", "", "/x\x00"):
        with pytest.raises(SpecError):
            tail_output_argv("3", path, 5)
    with pytest.raises(SpecError):
        tail_output_argv("3", "/tmp/x", -1)
    with pytest.raises(SpecError):
        tail_output_argv("3;reboot", "/tmp/x", 1)
    assert parse_tail_output(0, "/tmp/o.txt\na\nb\n") == ("/tmp/o.txt", "a\nb\n")
    assert parse_tail_output(3, "/tmp/o.txt\n") == ("/tmp/o.txt", None)


def test_tier_history_keyword_filters(tmp_path: Path) -> None:
    fake = _FakeTransport(0, REAL, "")
    tier = _tier(tmp_path, fake)
    rows = tier.history(days=3, states="failed", user="all", limit=2)
    argv = fake.argvs[-1]
    assert argv[argv.index("-S") + 1] == "now-3days" and "-a" in argv
    assert argv[argv.index("-s") + 1] == "FAILED" and len(rows) == 2
    with pytest.raises(SpecError, match="days"):
        tier.history(days=0)
    assert len(fake.argvs) == 1  # a bad value asks nothing


def test_service_history_as_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a REST route would send: plain JSON, the exit as text, who submitted each job."""
    import json

    from jupyter_tiers.app import actions

    tier = _tier(tmp_path, _FakeTransport(0, REAL, ""))
    tier.registry.add(JobRecord(profile="box", tier="slurm", job_id="3", name="notebook-job"))
    monkeypatch.setattr(actions, "_connect", lambda name, kind="batch": tier)
    data = json.loads(json.dumps(actions.history("box", days=2, state="F").to_json(), allow_nan=False))
    rows = {r["job_id"]: r for r in data["rows"]}
    assert data["profile"] == "box" and data["output"] is None
    assert rows["3"]["ours"] is True and rows["3"]["key"] == "box/3"
    # The job's ExitCode (9) is its batch script's; its failed step said 3 (issue 29 item 6).
    assert rows["3"]["exit_code"] == 9 and rows["3"]["exit"] == "step 0 exit 3"
    assert rows["3"]["max_rss"] == 16272 * 1024
    with pytest.raises(SpecError, match="tail"):
        actions.history("box", job="3", tail=-1)


def test_history_is_a_declared_capability_only_slurm_answers(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """BatchTier declares history and output_tail: a local tier says Unsupported naming the
    profile, and actions.history turns that (and a Kubernetes profile) into the same 400-class
    SpecError, before anything is asked."""
    from jupyter_tiers.app import actions
    from jupyter_tiers.batch.history import HistoryRow
    from jupyter_tiers.core.errors import Unsupported
    from jupyter_tiers.k8s.tier import K8sTier
    from jupyter_tiers.local.tier import LocalTier

    local = LocalTier(Profile(name="laptop", tier="local", settings={}), Registry(tmp_path / "r.sqlite"))
    with pytest.raises(Unsupported, match="'laptop' is a local tier; job history comes from Slurm"):
        local.history(days=2)
    row = HistoryRow("1", "1", "n", "u", "COMPLETED", 0, None, 1, 1, "n1", None, "", "", "", "", "/w")
    with pytest.raises(Unsupported, match="'laptop' is a local tier"):
        local.output_tail(row)
    monkeypatch.setattr(actions, "_connect", lambda name, kind="batch": local)
    with pytest.raises(SpecError, match=r"^profile: 'laptop' is a local tier; job history comes from Slurm"):
        actions.history("laptop")
    k8s = K8sTier(Profile(name="gpu", tier="kubernetes", settings={}), Registry(tmp_path / "k.sqlite"))
    monkeypatch.setattr(actions, "_connect", lambda name, kind="batch": k8s)
    with pytest.raises(SpecError, match=r"^profile: 'gpu' is a kubernetes tier; job history"):
        actions.history("gpu")


def test_every_task_of_our_array_is_ours_and_a_cancel_is_no_exit_code() -> None:
    """Issue 41 item 4, on Slurm's real answer: array 293's task 0 has the raw id 295 and task 1
    the raw id 293, so matching raw ids marked task 1 ours and task 0 another tool's. And a
    CANCELLED job's 0:0 read as ``exit 0``, a success."""
    from jupyter_tiers.slurm.history import mark_ours

    rows = {r.display_id: r for r in mark_ours(parse_history(REAL), {"293": "box/293", "4": "box/4"})}
    assert rows["293_0"].ours and rows["293_1"].ours
    assert rows["293_0"].key == rows["293_1"].key == "box/293"
    assert not rows["296"].ours and not rows["2"].ours
    assert rows["4"].exit == "cancelled" and rows["4"].to_json()["exit"] == "cancelled"
    assert rows["2"].exit == "0" and rows["3"].exit == "step 0 exit 3"  # a failure still says who
    # A raw id that is another array's task number is not ours by that number.
    assert not mark_ours(parse_history(REAL), {"295": "box/295"})[1].ours
