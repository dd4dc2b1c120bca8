"""A kernel using the local tier, as a process the harness can SIGKILL: ``python -m
tests.chaos.kernel_worker WORKDIR submit LINES`` submits a 2-rank job writing LINES numbered
lines per rank and follows its log; ``... WORKDIR attach JOB OFFSET`` is a new kernel attaching
to that job (as ``%tiers attach`` does) and following on from byte OFFSET of the log until the
job ends. Every line followed is printed as ``L END_OFFSET RANK TEXT``; the end as ``END STATE``.
Any error is one line, ``ERROR <text>``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from jupyter_tiers.local.tier import LocalTier
from jupyter_tiers.registry import Registry
from tests.helpers import local_profile

FAST = {"status_interval": 0.5, "rank_interval": 0.2, "first_poll": 0.1}


def main(argv: list[str]) -> int:
    workdir, mode = Path(argv[0]), argv[1]
    tier = LocalTier(local_profile(workdir / "jobs"), Registry(workdir / "registry.sqlite"),
                     watcher_options=FAST)
    try:
        if mode == "submit":
            body = f'for i in $(seq 0 {int(argv[2]) - 1}); do echo "n $i"; sleep 0.02; done'
            job = tier.submit(tier.make_spec(body, shell=True, nodes=2, name="chaos-kernel"))
            print("JOB", job.id, flush=True)
            offset = 0
        else:
            job = tier.job(tier.registry.get(argv[2], profile=tier.name))
            offset = int(argv[3])
        for line in job.follow(offset=offset, timeout=300):
            print("L", line.end_offset, line.rank, line.text, flush=True)
        print("END", job.wait(timeout=300).state.value, flush=True)
    except Exception as e:  # the harness counts errors, one line each
        print("ERROR", f"{type(e).__name__}: {e}".replace("\n", " "), flush=True)
        return 1
    finally:
        tier.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
