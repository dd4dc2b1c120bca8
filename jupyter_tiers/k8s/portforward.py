"""A local port forwarded to a pod's port through the Kubernetes API, as ``kubectl port-forward``
does (one WebSocket per connection)."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

from ..transport.relay import relay
from .client import KubeClient


class PortForward:
    """A local listening port relayed to a pod's port through the API (one WebSocket per
    connection, as the client requires)."""

    def __init__(self, client: KubeClient, namespace: str, pod: str, port: int, local_port: int) -> None:
        self.client = client
        self.namespace = namespace
        self.pod = pod
        self.port = port
        self._server = socket.create_server(("127.0.0.1", local_port))
        self.local_port = self._server.getsockname()[1]
        self._closed = threading.Event()
        threading.Thread(target=self._accept, name=f"jt-portforward-{pod}", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket) -> None:
        from kubernetes import client as k8s  # lazy: the kubernetes client is heavy
        from kubernetes.stream import portforward  # lazy: the kubernetes client is heavy

        # kubernetes.stream swaps the ApiClient's call_api for a websocket one while it opens
        # the stream: on the shared client, another thread's plain request made meanwhile went
        # down the websocket ("Missing required parameter `ports`"). Each forward gets its own.
        api: Any = k8s.ApiClient(self.client.api.configuration)
        try:
            pf: Any = portforward(k8s.CoreV1Api(api).connect_get_namespaced_pod_portforward, self.pod,
                             self.namespace, ports=str(self.port))
            remote = pf.socket(self.port)
            remote.setblocking(True)
        except Exception:
            conn.close()
            with contextlib.suppress(Exception):
                api.close()
            return
        relay(conn, remote, join_timeout=60)
        with contextlib.suppress(Exception):
            pf.close()
        with contextlib.suppress(Exception):
            api.close()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):  # wakes the accept() of the other thread (close alone does not)
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
