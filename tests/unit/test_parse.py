"""Parsers of Slurm command output, the merged log decoder and hostlists."""

from __future__ import annotations

import itertools
import random

import pytest

from jupyter_tiers.batch.logs import LogDecoder, split_log_line
from jupyter_tiers.core.errors import SubmitError
from jupyter_tiers.core.model import JobState, LogLine
from jupyter_tiers.core.timefmt import format_elapsed
from jupyter_tiers.slurm.parse import (
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    expand_hostlist,
    parse_elapsed,
    parse_sacct,
    parse_sbatch_parsable,
    parse_scontrol_jobs,
    parse_squeue,
)

# --- sbatch --parsable ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stdout", "job_id"),
    [("123\n", "123"), ("123;cluster\n", "123"), ("  456  ", "456"), ("\n789;c-1.x\n", "789"),
     # plain sbatch (a wrapper without --parsable), and on a multi-cluster site
     ("Submitted batch job 123\n", "123"), ("Submitted batch job 124 on cluster ceo\n", "124")],
)
def test_parse_sbatch_parsable(stdout: str, job_id: str) -> None:
    assert parse_sbatch_parsable(stdout) == job_id


@pytest.mark.parametrize(
    "stdout",
    [
        "",
        "\n\n",
        "Submitted batch job\n",
        "Submitted batch job 123 on cluster\n",
        "Submitted batch job 123 on cluster bad cluster\n",
        "Submitted batch job 12a\n",
        "submitted batch job 123\n",
        "sbatch: error: Batch job submission failed: Invalid account\n",
        "123abc",
        "12 3",
        "123;",
        "123;bad cluster",
    ],
)
def test_parse_sbatch_parsable_garbage(stdout: str) -> None:
    with pytest.raises(SubmitError):
        parse_sbatch_parsable(stdout)


def test_parse_sbatch_parsable_keeps_what_sbatch_said() -> None:
    with pytest.raises(SubmitError, match="Invalid account"):
        parse_sbatch_parsable("sbatch: error: Invalid account\n")


# --- squeue -----------------------------------------------------------------------------------


def test_squeue_format_has_eight_fields() -> None:
    assert SQUEUE_FORMAT.count("|") == 7


def test_parse_squeue_pending_and_running() -> None:
    out = (
        "123|PENDING|Resources|2024-05-01T12:00:00|0:00||train|2\n"
        "124|RUNNING|None|2024-05-01T10:00:00|1:05|node[1-2]|eval job|2\n"
        "garbage line\n"
        "\n"
        "JOBID|STATE|REASON|START|TIME|NODES|NAME|N\n"
    )
    rows = parse_squeue(out)
    assert set(rows) == {"123", "124"}
    pend = rows["123"]
    assert pend.state is JobState.PENDING
    assert pend.reason == "Resources"
    assert pend.start_time == "2024-05-01T12:00:00"
    assert pend.nodelist is None
    assert pend.elapsed_s == 0
    assert pend.name == "train"
    run = rows["124"]
    assert run.state is JobState.RUNNING
    assert run.reason is None
    assert run.nodelist == "node[1-2]"
    assert run.elapsed_s == 65
    assert run.name == "eval job"
    assert run.exit_code is None


def test_parse_squeue_pending_without_expected_start() -> None:
    rows = parse_squeue("9|PENDING|Priority|N/A|0:00|(null)|x|1\n")
    assert rows["9"].start_time is None
    assert rows["9"].nodelist is None
    assert rows["9"].reason == "Priority"


# --- sacct ------------------------------------------------------------------------------------


def _sacct_row(job_id: str, state: str, exit_code: str, elapsed: str = "00:01:05",
               nodes: str = "node[1-2]", reason: str = "None", name: str = "train") -> str:
    return "|".join(
        [job_id, state, exit_code, elapsed, nodes, reason, "2024-05-01T10:00:00",
         "2024-05-01T10:01:05", name]
    )


def test_sacct_fields_match_parser() -> None:
    assert len(SACCT_FIELDS.split(",")) == 9
    assert SACCT_FIELDS.split(",")[0] == "JobIDRaw"


def test_parse_sacct_states_and_exit_codes() -> None:
    out = "\n".join(
        [
            _sacct_row("10", "COMPLETED", "0:0"),
            _sacct_row("11", "FAILED", "7:0", reason="NonZeroExitCode"),
            _sacct_row("12", "CANCELLED by 0", "0:15"),
            _sacct_row("13", "TIMEOUT", "0:0", elapsed="1-00:00:30"),
            _sacct_row("14", "PENDING", "0:0", elapsed="00:00:00", nodes="None assigned"),
            "10.batch|COMPLETED|0:0|00:01:05|node1|None|x|y|batch",
        ]
    ) + "\n"
    rows = parse_sacct(out)
    assert set(rows) == {"10", "11", "12", "13", "14"}

    done = rows["10"]
    assert (done.state, done.exit_code, done.exit_signal) == (JobState.COMPLETED, 0, 0)
    assert done.elapsed_s == 65
    assert done.nodelist == "node[1-2]"
    assert done.start_time == "2024-05-01T10:00:00"
    assert done.end_time == "2024-05-01T10:01:05"
    assert done.reason is None
    assert done.name == "train"

    failed = rows["11"]
    assert (failed.state, failed.exit_code, failed.exit_signal) == (JobState.FAILED, 7, 0)
    assert failed.reason == "NonZeroExitCode"

    cancelled = rows["12"]
    assert cancelled.state is JobState.CANCELLED
    assert (cancelled.exit_code, cancelled.exit_signal) == (0, 15)

    timeout = rows["13"]
    assert timeout.state is JobState.TIMEOUT
    assert timeout.state.terminal and not timeout.state.ok
    assert timeout.elapsed_s == 86400 + 30

    assert rows["14"].nodelist is None
    assert not rows["14"].state.terminal


def test_parse_sacct_requeued_duplicate_rows_last_wins() -> None:
    out = "\n".join(
        [
            _sacct_row("20", "NODE_FAIL", "0:0", nodes="node3"),
            _sacct_row("20", "REQUEUED", "0:0", nodes="node3"),
            _sacct_row("20", "RUNNING", "0:0", nodes="node4", elapsed="00:00:09"),
        ]
    )
    rows = parse_sacct(out)
    assert list(rows) == ["20"]
    assert rows["20"].state is JobState.RUNNING
    assert rows["20"].nodelist == "node4"
    assert rows["20"].elapsed_s == 9


def test_parse_sacct_unknown_state_and_bad_exit_code() -> None:
    rows = parse_sacct(_sacct_row("30", "WEIRD", "") + "\n")
    assert rows["30"].state is JobState.UNKNOWN
    assert rows["30"].exit_code is None and rows["30"].exit_signal is None


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("CANCELLED by 0", JobState.CANCELLED),
        ("CANCELLED+", JobState.CANCELLED),
        ("completed", JobState.COMPLETED),
        ("CD", JobState.COMPLETED),
        ("PD", JobState.PENDING),
        ("OOM", JobState.OUT_OF_MEMORY),
        ("OUT_OF_MEMORY", JobState.OUT_OF_MEMORY),
        ("", JobState.UNKNOWN),
        ("nonsense", JobState.UNKNOWN),
    ],
)
def test_job_state_parse(text: str, state: JobState) -> None:
    assert JobState.parse(text) is state


# --- scontrol -o show job ---------------------------------------------------------------------

SCONTROL_FAILED = (
    "JobId=41 JobName=train UserId=alice(1000) GroupId=alice(1000) MCS_label=N/A Priority=4294901759 "
    "Nice=0 Account=(null) QOS=normal JobState=FAILED Reason=NonZeroExitCode Dependency=(null) "
    "Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=1:0 RunTime=00:00:05 TimeLimit=UNLIMITED "
    "TimeMin=N/A SubmitTime=2024-05-01T10:00:00 EligibleTime=2024-05-01T10:00:00 AccrueTime=Unknown "
    "StartTime=2024-05-01T10:00:01 EndTime=2024-05-01T10:00:06 Deadline=N/A SuspendTime=None "
    "SecsPreSuspend=0 LastSchedEval=2024-05-01T10:00:01 Partition=debug AllocNode:Sid=login:123 "
    "ReqNodeList=(null) ExcNodeList=(null) NodeList=node[1-2] BatchHost=node1 NumNodes=2 NumCPUs=2 "
    "NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,mem=2G,node=2,billing=2 "
    "Socks/Node=* NtasksPerN:B:S:C=1:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 "
    "Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) "
    "Command=/home/alice/jupyter-tiers/train-20240501/job.sbatch "
    "WorkDir=/home/alice/jupyter-tiers/train-20240501 "
    "StdErr=/home/alice/jupyter-tiers/train-20240501/job.log StdIn=/dev/null "
    "StdOut=/home/alice/jupyter-tiers/train-20240501/job.log Power="
)
SCONTROL_PENDING = (
    "JobId=42 JobName=big one UserId=alice(1000) JobState=PENDING "
    "Reason=launch failed requeued held Dependency=(null) Requeue=1 Restarts=1 ExitCode=0:0 "
    "RunTime=00:00:00 TimeLimit=1-00:00:00 StartTime=Unknown EndTime=Unknown Partition=gpu "
    "NodeList=(null) NumNodes=4"
)
SCONTROL_RUNNING = (
    "JobId=43 ArrayJobId=43 JobName=long JobState=RUNNING Reason=None ExitCode=0:0 "
    "RunTime=2-03:04:05 StartTime=2024-04-29T07:00:00 EndTime=2024-05-02T07:00:00 NodeList=gpu[01-04]"
)


def test_parse_scontrol_failed_job() -> None:
    info = parse_scontrol_jobs(SCONTROL_FAILED + "\n")["41"]
    assert info.state is JobState.FAILED
    assert info.reason == "NonZeroExitCode"
    assert (info.exit_code, info.exit_signal) == (1, 0)
    assert info.nodelist == "node[1-2]"
    assert info.elapsed_s == 5
    assert info.start_time == "2024-05-01T10:00:01"
    assert info.end_time == "2024-05-01T10:00:06"
    assert info.name == "train"


def test_parse_scontrol_values_with_spaces() -> None:
    rows = parse_scontrol_jobs("\n".join([SCONTROL_FAILED, SCONTROL_PENDING, SCONTROL_RUNNING, ""]))
    assert set(rows) == {"41", "42", "43"}
    pend = rows["42"]
    assert pend.state is JobState.PENDING
    assert pend.reason == "launch failed requeued held"
    assert pend.name == "big one"
    assert pend.nodelist is None
    assert pend.start_time is None and pend.end_time is None
    run = rows["43"]
    assert run.state is JobState.RUNNING
    assert run.reason is None
    assert run.elapsed_s == ((2 * 24 + 3) * 60 + 4) * 60 + 5
    assert run.nodelist == "gpu[01-04]"


def test_parse_scontrol_ignores_non_job_lines() -> None:
    assert parse_scontrol_jobs("No jobs in the system\n\nslurm_load_jobs error: x\n") == {}


# --- durations --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0:00", 0),
        ("3:04", 184),
        ("02:03:04", 7384),
        ("1-02:03:04", 93784),
        ("10-00:00:00", 864000),
        (" 00:00:05 ", 5),
        ("", None),
        ("N/A", None),
        ("INVALID", None),
        ("UNLIMITED", None),
        ("a:b", None),
        ("x-01:00:00", None),
        ("1:2:3:4", None),
    ],
)
def test_parse_elapsed(text: str, seconds: int | None) -> None:
    assert parse_elapsed(text) == seconds


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "00:00:00"),
        (65, "00:01:05"),
        (3599, "00:59:59"),
        (86399, "23:59:59"),
        (86400, "1-00:00:00"),
        (93784, "1-02:03:04"),
        (12.9, "00:00:12"),
        (-5, "00:00:00"),
        (None, "--:--:--"),
    ],
)
def test_format_elapsed(seconds: float | None, text: str) -> None:
    assert format_elapsed(seconds) == text


def test_elapsed_round_trip() -> None:
    for seconds in (0, 1, 59, 60, 3600, 86399, 86400, 90061, 10 * 86400 + 1):
        assert parse_elapsed(format_elapsed(seconds)) == seconds


# --- hostlists --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "names"),
    [
        (
            "node[1-3,7],gpu[01-02],login",
            ["node1", "node2", "node3", "node7", "gpu01", "gpu02", "login"],
        ),
        ("node1", ["node1"]),
        ("a,b", ["a", "b"]),
        ("gpu[08-11]", ["gpu08", "gpu09", "gpu10", "gpu11"]),
        ("n[001-002]-ib", ["n001-ib", "n002-ib"]),
        ("", []),
    ],
)
def test_expand_hostlist(text: str, names: list[str]) -> None:
    assert expand_hostlist(text) == names


# --- merged log -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        ("3: hello", (3, "hello")),
        ("137:  two spaces", (137, " two spaces")),
        ("0:", (0, "")),
        ("12:no space", (12, "no space")),
        ("slurmstepd: error: *** JOB 41 ***", (None, "slurmstepd: error: *** JOB 41 ***")),
        ("12345678: too many digits", (None, "12345678: too many digits")),
        ("x3: no", (None, "x3: no")),
        (" 3: leading space", (None, " 3: leading space")),
        ("", (None, "")),
    ],
)
def test_split_log_line(line: str, parsed: tuple[int | None, str]) -> None:
    assert split_log_line(line) == parsed


def _decode_all(data: bytes) -> list[LogLine]:
    dec = LogDecoder()
    return dec.feed(data) + dec.flush()


def test_log_decoder_split_mid_line_and_mid_character() -> None:
    data = "0: héllo wörld\n1: ✓ done\nnot a rank line\n".encode()
    cut = data.index("é".encode()) + 1  # inside the two bytes of é
    dec = LogDecoder()
    first = dec.feed(data[:cut])
    assert first == []
    assert dec.offset == 0
    assert dec.received == cut
    rest = dec.feed(data[cut:])
    assert [(ln.rank, ln.text) for ln in rest] == [
        (0, "héllo wörld"),
        (1, "✓ done"),
        (None, "not a rank line"),
    ]
    assert all("\ufffd" not in ln.text for ln in rest)
    ends = [ln.end_offset for ln in rest]
    assert ends[-1] == len(data) == dec.offset == dec.received
    assert ends[0] == len("0: héllo wörld\n".encode())
    assert dec.flush() == []


def test_log_decoder_offset_is_bytes_of_complete_lines() -> None:
    dec = LogDecoder(offset=100)
    lines = dec.feed("2: ünï\n2: partial ✓".encode())
    assert [ln.text for ln in lines] == ["ünï"]
    complete = len("2: ünï\n".encode())
    assert dec.offset == 100 + complete
    assert lines[0].end_offset == 100 + complete
    assert dec.received == 100 + len("2: ünï\n2: partial ✓".encode())


def test_log_decoder_crlf_and_empty_lines() -> None:
    lines = _decode_all(b"1: a\r\n\n2: b\n")
    assert [(ln.rank, ln.text) for ln in lines] == [(1, "a"), (None, ""), (2, "b")]
    assert [ln.end_offset for ln in lines] == [6, 7, 12]


def test_log_decoder_flush_trailing_partial_line() -> None:
    dec = LogDecoder()
    assert [ln.text for ln in dec.feed(b"5: one\n5: tw")] == ["one"]
    assert dec.feed(b"o") == []
    tail = dec.flush()
    assert [(ln.rank, ln.text, ln.end_offset) for ln in tail] == [(5, "two", 13)]
    assert dec.offset == dec.received == 13
    assert dec.flush() == []


def test_log_decoder_truncated_utf8_before_newline_stays_in_its_line() -> None:
    # The decoder decodes a whole block at once; a broken sequence must not swallow the newline.
    lines = _decode_all(b"1: a\xe2\x82\n2: b\xff\n\xf0\x9f\n")
    assert [(ln.rank, ln.text) for ln in lines] == [(1, "a\ufffd"), (2, "b\ufffd"), (None, "\ufffd")]
    assert [ln.end_offset for ln in lines] == [7, 13, 16]


def test_log_decoder_invalid_utf8_is_replaced_not_fatal() -> None:
    lines = _decode_all(b"1: bad \xff byte\n")
    assert lines[0].rank == 1
    assert lines[0].text == "bad \ufffd byte"
    assert lines[0].end_offset == len(b"1: bad \xff byte\n")


def _random_log(rng: random.Random) -> bytes:
    words = ["loss", "ü", "✓", "日本", "é", "step", "", " ", "🙂", "\r"]
    out = []
    for _ in range(rng.randint(0, 40)):
        rank = rng.choice([None, 0, 1, 17, 255])
        text = "".join(rng.choice(words) for _ in range(rng.randint(0, 6)))
        out.append(text if rank is None else f"{rank}: {text}")
    tail = rng.choice(["", "7: unfinished ✓", "é"])
    return ("\n".join(out) + ("\n" if out else "") + tail).encode()


def _cuts(rng: random.Random, n: int) -> list[int]:
    return sorted(rng.sample(range(n + 1), k=min(n + 1, rng.randint(0, 8))))


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def test_log_decoder_any_chunking_gives_same_lines() -> None:
    rng = random.Random(20240501)
    for _ in range(500):
        data = _random_log(rng)
        expected = _decode_all(data)
        dec = LogDecoder()
        got: list[LogLine] = []
        for chunk in _chunks(data, _cuts(rng, len(data))):
            got += dec.feed(chunk)
            assert dec.received - dec.offset < len(data) + 1
            assert data[dec.offset - 1 : dec.offset] in (b"\n", b"")
        got += dec.flush()
        assert got == expected
        assert dec.offset == len(data)


def test_log_decoder_resume_after_drop() -> None:
    """A dropped stream is reopened at ``received`` with the same decoder (the watcher's reconnect),
    or at ``offset`` with a new decoder (a new process); both give the lines of one whole read."""
    rng = random.Random(7)
    for _ in range(500):
        data = _random_log(rng)
        expected = _decode_all(data)
        drop = rng.randint(0, len(data))

        # same decoder, stream reopened at received
        dec = LogDecoder()
        got: list[LogLine] = []
        for chunk in _chunks(data[:drop], _cuts(rng, drop)):
            got += dec.feed(chunk)
        assert dec.received == drop
        resumed = data[dec.received :]
        for chunk in _chunks(resumed, _cuts(rng, len(resumed))):
            got += dec.feed(chunk)
        got += dec.flush()
        assert got == expected

        # new decoder at the first decoder's offset (what the registry/a new process knows)
        first = LogDecoder()
        lines = first.feed(data[:drop])
        second = LogDecoder(offset=first.offset)
        rest = data[first.offset :]
        for chunk in _chunks(rest, _cuts(rng, len(rest))):
            lines += second.feed(chunk)
        lines += second.flush()
        assert lines == expected
        assert second.offset == len(data)


def test_log_line_offsets_index_the_stream() -> None:
    data = "0: a\n1: ✓✓\n\n3: end\n".encode()
    start = 0
    for line in _decode_all(data):
        raw = data[start : line.end_offset]
        assert raw.endswith(b"\n")
        assert split_log_line(raw[:-1].decode()) == (line.rank, line.text)
        start = line.end_offset
    assert start == len(data)


def test_log_decoder_starting_mid_line_skips_to_the_next_whole_line() -> None:
    data = b"0: first line\n1: second\n0: third\n"
    start = 5  # inside "first line"
    decoder = LogDecoder(start, skip_partial=True)
    lines = decoder.feed(data[start:start + 3]) + decoder.feed(data[start + 3:])
    assert [(ln.rank, ln.text) for ln in lines] == [(1, "second"), (0, "third")]
    assert decoder.offset == len(data)
    assert LogDecoder(0, skip_partial=True).feed(data)[0].text == "first line"  # offset 0: no skip
