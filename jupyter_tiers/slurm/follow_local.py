"""The followed log on this machine (a profile without host): plain ``tail -F`` on the pipe.

Over SSH the follow program relays tail through a coalescing perl loop (commands.FOLLOW_SH), which
saves SSH packets; on this machine there are no packets to save and the relay's extra copy costs
two thirds of the throughput (bench/local_slurm.py). Closing the stream ends the command's whole
session (LocalStream.close), so tail needs no watch of its reader.
"""

from __future__ import annotations

from .commands import BASH, log_path

FOLLOW_HERE_SH = 'exec tail -c +"$2" -F -s 1 -- "$1" </dev/null 2>/dev/null\n'


def follow_here_argv(jobdir: str, offset: int) -> list[str]:
    """Follow the job's log from byte ``offset`` (the argv words as follow_argv's)."""
    return [*BASH, FOLLOW_HERE_SH, "jt-follow", log_path(jobdir), str(offset + 1)]
