"""A kernel using the local tier, as a process the harness can SIGKILL: ``python -m
tests.chaos.kernel_worker WORKDIR submit LINES`` submits a 2-rank job writing LINES numbered
lines per rank and follows its log; ``... WORKDIR attach JOB OFFSET`` is a new kernel attaching
to that job (as ``%tiers attach`` does) and following on from byte OFFSET of the log until the
job ends. Every line followed is printed as ``L END_OFFSET RANK TEXT``; the end as ``END STATE``.
``... WORKDIR serve NAME LISTEN_AFTER`` rolls out a 2-replica local service whose replicas listen
LISTEN_AFTER seconds after they start (``SVC NAME`` once applied);
``... WORKDIR attach-service NAME`` attaches to it, waits until it is ready, prints ``READY
DETAIL BODY`` (the registry's detail, one answer of its URL), deletes it and prints ``DELETED``.
Any error is one line, ``ERROR <text>``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from jupyter_tiers.config.registry import Registry
from jupyter_tiers.local.tier import LocalTier
from tests.helpers import local_profile

FAST = {"status_interval": 0.5, "rank_interval": 0.2, "first_poll": 0.1}


# A replica that is slow to listen (a model loading), so a kill lands mid-rollout.
SERVE_BODY = """\
import http.server, os, time
time.sleep({listen_after})
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = os.environ["JT_REPLICA"].encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
"""


def serve(workdir: Path, mode: str, name: str, listen_after: float = 1.0) -> None:
    import urllib.request

    from jupyter_tiers.local.serve_tier import LocalServeTier

    tier = LocalServeTier(local_profile(workdir / "services"), Registry(workdir / "registry.sqlite"),
                          poll_interval=0.1)
    try:
        if mode == "serve":
            tier.apply(tier.make_spec(SERVE_BODY.format(listen_after=listen_after), name=name, replicas=2,
                                      readiness="/"))
            print("SVC", name, flush=True)
            time.sleep(300)  # a kernel that stays (until the harness kills it)
            return
        svc = tier.service(tier.registry.get(name, profile=tier.name))
        status = svc.wait_ready(120)
        with urllib.request.urlopen(str(svc.url), timeout=30) as answer:
            body = answer.read().decode()
        print("READY", status.state.value, tier.registry.get(name, profile=tier.name).detail, body,
              flush=True)
        svc.delete()
        print("DELETED", flush=True)
    finally:
        tier.close()


def main(argv: list[str]) -> int:
    workdir, mode = Path(argv[0]), argv[1]
    if mode in ("serve", "attach-service"):
        try:
            serve(workdir, mode, argv[2], *(float(a) for a in argv[3:4]))
        except Exception as e:  # the harness counts errors, one line each
            print("ERROR", f"{type(e).__name__}: {e}".replace("\n", " "), flush=True)
            return 1
        return 0
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
