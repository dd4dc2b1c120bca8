"""Submit round trip: jupyter-tiers' warm ``SlurmTier.submit`` against a raw ``ssh host sbatch
--parsable`` over a warm OpenSSH ControlMaster, on the cluster in a box.

Ours is the whole call a notebook cell makes: render the job, pack the job directory, one remote
command that unpacks it and runs sbatch, parse the id, record it in the registry. Raw is what a
user would type with the same script already on the login node: ``ssh -o ControlPath=... host
sbatch --parsable DIR/job.sbatch`` (OpenSSH's multiplexed session: no handshake per command).
Both connections are opened and used once before timing. Submits alternate ours, raw, ours, ...
so a busy machine slows both alike; the figure is the median of ``--count`` each, and the ratio
is ours / raw. ``--breakdown`` also times ours' parts (render + pack, the remote command, the
registry write) and a bare round trip of both transports (``true``). Every job is held
(``--hold``) and cancelled at the end, so nothing runs on the cluster.

Run: .venv/bin/python bench/submit.py [--count 20] [--breakdown]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _cluster import box_tier, cluster_env, slurm

BODY = "print('hello from the submit bench')\n"


def ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--breakdown", action="store_true")
    args = ap.parse_args()

    env = cluster_env()
    tier = box_tier()
    tier.transport.connect()
    control = Path(tempfile.mkdtemp(prefix="jt-bench-cm-")) / "cm"
    ssh = ["ssh", "-i", env["JT_SSH_KEY"], "-o", f"UserKnownHostsFile={env['JT_KNOWN_HOSTS']}",
           "-o", "BatchMode=yes", "-o", "ControlMaster=auto", "-o", f"ControlPath={control}",
           "-o", "ControlPersist=300", "-p", env["JT_SSH_PORT"],
           f"{env['JT_SSH_USER']}@{env['JT_SSH_HOST']}"]
    spec = tier.make_spec(BODY, name="submit-bench", sbatch_options=["--hold"])
    # The raw side's script: the one ours renders, already on the login node.
    first = tier.submit(spec)
    script = f"{first.record.jobdir}/job.sbatch"
    ids = [first.id]
    subprocess.run([*ssh, "true"], check=True)  # start the ControlMaster

    def raw_submit() -> str:
        out = subprocess.run([*ssh, "sbatch", "--parsable", "--hold", script], check=True,
                             capture_output=True, text=True).stdout
        return out.strip().split(";")[0]

    ids.append(raw_submit())  # warm both once more
    ids.append(tier.submit(spec).id)
    ours: list[float] = []
    raw: list[float] = []
    try:
        for _ in range(args.count):
            t0 = time.perf_counter()
            ids.append(tier.submit(spec).id)
            ours.append(ms(t0))
            t0 = time.perf_counter()
            ids.append(raw_submit())
            raw.append(ms(t0))
        parts: dict[str, list[float]] = {}
        if args.breakdown:
            from jupyter_tiers.slurm import commands
            from jupyter_tiers.slurm.render import render_job

            for _ in range(args.count):
                t0 = time.perf_counter()
                rendered = render_job(spec)
                payload = commands.pack_job(rendered)
                parts.setdefault("render + pack (ms)", []).append(ms(t0))
                jobdir = f"{tier.profile.workdir}/{commands.job_dir_name('bd', token=os.urandom(3).hex())}"
                t0 = time.perf_counter()
                res = tier.transport.run(commands.submit_argv(jobdir, payload), stdin=payload)
                parts.setdefault("remote command: unpack + sbatch (ms)", []).append(ms(t0))
                ids.append(res.text().split()[0])
                t0 = time.perf_counter()
                tier.transport.run(["true"])
                parts.setdefault("ours: a bare round trip, `true` (ms)", []).append(ms(t0))
                t0 = time.perf_counter()
                subprocess.run([*ssh, "true"], check=True)
                parts.setdefault("raw: a bare round trip, `true` (ms)", []).append(ms(t0))
    finally:
        for i in range(0, len(ids), 50):
            slurm("scancel", *ids[i:i + 50])
        subprocess.run([*ssh, "-O", "exit"], capture_output=True)
        tier.close()

    o, r = statistics.median(ours), statistics.median(raw)
    print(f"\nSubmit round trip over ssh to {env['JT_SSH_HOST']}:{env['JT_SSH_PORT']}, warm connections, "
          f"median of {args.count} each, alternating")
    row = "{:<44} {:>9} {:>9} {:>9}   {}"
    print(row.format("", "ours", "raw ssh", "ours/raw", "target"))
    verdict = "met" if o / r <= 1.2 else "MISSED"
    print(row.format("  submit, median (ms)", f"{o:.0f}", f"{r:.0f}", f"{o / r:.2f}x",
                     f"<= 1.2x raw: {verdict}"))
    print(row.format("  submit, min (ms)", f"{min(ours):.0f}", f"{min(raw):.0f}", "", ""))
    print(row.format("  submit, max (ms)", f"{max(ours):.0f}", f"{max(raw):.0f}", "", ""))
    for name, values in parts.items():
        print(row.format(f"  {name}", f"{statistics.median(values):.1f}", "", "", ""))


if __name__ == "__main__":
    sys.exit(main())
