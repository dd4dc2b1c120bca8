"""``python -m tests.k8s_emulator --port 0 --kubeconfig PATH``: serve until killed."""

from __future__ import annotations

import argparse
import signal
import tempfile
import threading
from pathlib import Path

from .emulator import Emulator


def main(argv: list[str] | None = None) -> int:
    """Run an emulator in the foreground; prints its URL (and the kubeconfig path) on stdout."""
    ap = argparse.ArgumentParser(prog="python -m tests.k8s_emulator")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--kubeconfig", type=Path, default=None, help="where to write the kubeconfig")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--bookmark-interval", type=float, default=60.0)
    ap.add_argument("--no-kubelet", action="store_true")
    ap.add_argument("--no-controllers", action="store_true")
    args = ap.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="k8s-emulator-"))
    emu = Emulator(
        workdir,
        port=args.port,
        bookmark_interval=args.bookmark_interval,
        with_kubelet=not args.no_kubelet,
        with_controllers=not args.no_controllers,
    )
    url = emu.start()
    if args.kubeconfig:
        emu.write_kubeconfig(args.kubeconfig)
    print(url, flush=True)
    print(f"kubeconfig: {args.kubeconfig or emu.kubeconfig_path}", flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    emu.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
