"""Faults made from the outside, as a user's world makes them: a real server restarted on its
port, a real pod deleted through the API, signals to real processes, a file damaged on disk.
Nothing here patches jupyter_tiers."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.k8s_emulator.emulator import Emulator
from tests.k8s_emulator.server import ApiServer


def restart_api_server(emulator: Emulator, down_s: float) -> float:
    """Stop the emulator's HTTP API server (every connection, watch and log stream closed, as
    when a real kube-apiserver restarts), keep it down ``down_s`` seconds, then serve the same
    store on the same port again. Returns the monotonic time it answered again."""
    old = emulator.server
    old.stop()
    time.sleep(down_s)
    new = ApiServer(old.store, host=old.host, port=old.port, bookmark_interval=old.bookmark_interval,
                    default_watch_timeout=old.default_watch_timeout, log_source=old.log_source,
                    portforward_handler=old.portforward_handler,
                    root_ca_configmap=old.root_ca_configmap)
    new.tokens = dict(old.tokens)
    new.request_counts = old.request_counts  # benchmarks may hold the counters
    new.namespace_counts = old.namespace_counts
    new.watch_event_delay = old.watch_event_delay
    deadline = time.monotonic() + 30.0
    while True:  # the port may linger a moment in the kernel
        try:
            new.start()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    emulator.server = new
    return time.monotonic()


def delete_pod(emulator: Emulator, namespace: str, pod: str) -> None:
    """Delete a pod through the API, as ``kubectl delete pod`` does (graceful)."""
    from kubernetes import client

    with emulator.api_client() as api:
        client.CoreV1Api(api).delete_namespaced_pod(pod, namespace)


def evict_pod(emulator: Emulator, namespace: str, pod: str) -> None:
    """Evict a pod through the Eviction subresource, as ``kubectl drain`` does (graceful)."""
    from kubernetes import client

    with emulator.api_client() as api:
        client.CoreV1Api(api).create_namespaced_pod_eviction(
            pod, namespace, client.V1Eviction(metadata=client.V1ObjectMeta(name=pod, namespace=namespace)))


def node_pressure(emulator: Emulator, namespace: str) -> list[str]:
    """The node runs out of memory: its kubelet evicts every pod of ``namespace`` on it (they stay
    Failed/Evicted). Returns the evicted pods."""
    return list(emulator.kubelet.evict_pods("memory", namespace=namespace))


def kill(pid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to one process we started (never by name)."""
    os.kill(pid, sig)


def damage_file(path: Path, offset: int, data: bytes | None = None, *, truncate: bool = False) -> None:
    """Overwrite bytes at ``offset`` in place (``data``), or cut the file there."""
    with open(path, "r+b") as f:
        if truncate:
            f.truncate(offset)
        else:
            f.seek(offset)
            f.write(data or b"")
