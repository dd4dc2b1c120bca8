"""A kernel whose machine clock is stepped (run under libfaketime by tests/chaos/scenarios_clock.py):
``python -m tests.chaos.clock_worker WORKDIR GO_FILE`` submits a local job with a 30-minute
``--time`` limit that writes numbered lines until GO_FILE exists, then prints, every 0.1 s until
the job ends, ``S STATE ELAPSED ROW_ELAPSED WALL`` — the job status's elapsed seconds (the widget
shows these), the ``%tiers jobs`` row's, and this process's wall clock — and at the end ``LOG
N,N,...`` (the numbers of the job's log lines, in order) and ``END STATE ELAPSED SUMMARY``. Any
error is one line, ``ERROR <text>``."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

from jupyter_tiers.app.actions import item_from
from jupyter_tiers.batch.status import summary_line
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.local.tier import LocalTier
from tests.helpers import local_profile


def main(argv: list[str]) -> int:
    workdir, go = Path(argv[0]), argv[1]
    tier = LocalTier(local_profile(workdir / "jobs"), Registry(workdir / "registry.sqlite"))
    try:
        body = f'i=0; while [ ! -e {shlex.quote(go)} ]; do echo "n $i"; i=$((i+1)); sleep 0.1; done'
        job = tier.submit(tier.make_spec(body, shell=True, name="clock-step", time="00:30:00"))
        print("JOB", job.id, flush=True)
        while True:
            status = job.status()
            row = item_from(job.record, status)
            print("S", status.state.value, status.elapsed_s, row.elapsed_s, f"{time.time():.3f}", flush=True)
            if status.state.terminal:
                numbers = [w[-1] for w in (ln.split() for ln in job.logs(rank=0).splitlines())
                           if len(w) >= 2 and w[-2] == "n" and w[-1].isdigit()]  # "0: n 12"
                print("LOG", ",".join(numbers), flush=True)
                print("END", status.state.value, status.elapsed_s, summary_line(status), flush=True)
                return 0
            time.sleep(0.1)
    except Exception as e:  # the test reads errors, one line each
        print("ERROR", f"{type(e).__name__}: {e}".replace("\n", " "), flush=True)
        return 1
    finally:
        tier.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
