"""Issue 41 item 2: ``File ".../main.py", line 7`` is line 8 of the cell the user sees (the magic
line is line 1), and the path is a file on the cluster. Tracebacks, the summary and the reason show
the cell's lines."""

from __future__ import annotations

import random

from jupyter_tiers.batch.celllines import in_cell

JOBDIR = "/var/tmp/jupyter-tiers-jobs/ux-train2-20261207-101500-a1b2c3"
TRACE = (
    "[rank 0] Traceback (most recent call last):\n"
    f'[rank 0]   File "{JOBDIR}/main.py", line 7, in <module>\n'
    "[rank 0]     step(batch)\n"
    f'[rank 0]   File "{JOBDIR}/main.py", line 3, in step\n'
    '[rank 0]   File "/usr/lib/python3/dist-packages/foo/main.py", line 12, in run\n'
    "[rank 0] ZeroDivisionError: division by zero\n"
)


def test_the_jobs_frames_read_as_the_cells_lines() -> None:
    out = in_cell(TRACE, JOBDIR)
    assert '[rank 0]   File "cell", line 8, in <module>' in out
    assert '[rank 0]   File "cell", line 4, in step' in out
    assert '/usr/lib/python3/dist-packages/foo/main.py", line 12' in out  # a library's main.py stays
    assert JOBDIR not in out


def test_the_same_directory_under_another_root_is_matched_by_its_name() -> None:
    """A rank may see the job directory through a symlink or another mount point."""
    other = TRACE.replace("/var/tmp/jupyter-tiers-jobs", "/scratch/alice/.tiers")
    assert in_cell(other, JOBDIR).count('File "cell", line') == 2


def test_text_without_the_file_is_returned_as_it_is() -> None:
    text = "step=1 loss=2.0\n"
    assert in_cell(text, JOBDIR) is text and in_cell(TRACE, "") == TRACE


def test_in_cell_fuzz_and_linear_shape() -> None:
    """Seeded: random text around the frame pattern never raises and only ever changes frames of
    this job's main.py; a long quote-free line is read once (the repeat stops at a quote)."""
    rng = random.Random(4102)
    pieces = ['File "', f"{JOBDIR}/main.py", '", line ', "7", "\n", "/", '"', "main.py", "x" * 50, " "]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        out = in_cell(text, JOBDIR)
        assert out == text or 'File "cell", line ' in out
    long = 'File "' + "/a" * 100_000 + "/main.py"
    assert in_cell(long, JOBDIR) == long
