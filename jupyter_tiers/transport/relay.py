"""A TCP relay: two connected sockets copied both ways until both sides are done. The local
tier's front port relays each connection to a replica with it, the Kubernetes tier's
port-forward to a pod's port.
"""

from __future__ import annotations

import contextlib
import socket
import threading


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def relay(client: socket.socket, upstream: socket.socket, join_timeout: float | None = None) -> None:
    """Copy both ways until both sides are done (or, once the client is done, ``join_timeout``
    seconds have passed), then close both. Also the Kubernetes tier's port-forward relay."""
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    try:
        back.start()
    except BaseException:  # no thread: nothing is relayed, so close both rather than leak them
        for sock in (client, upstream):
            with contextlib.suppress(Exception):
                sock.close()
        raise
    _pump(client, upstream)
    back.join(join_timeout)
    for sock in (client, upstream):
        with contextlib.suppress(Exception):  # a port-forward socket may fail to close otherwise
            sock.close()
