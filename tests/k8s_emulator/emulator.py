"""One object wiring the store, the HTTP API server, the controllers and the kubelet."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import secrets
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from .server import ApiServer, User
from .store import Store


class Emulator:
    """A Kubernetes API emulator for tests.

    ``start()`` serves on 127.0.0.1 (ephemeral port) and writes ``kubeconfig_path`` (context
    ``emulator``, namespace ``default``, the admin bearer token).  ``controllers`` and ``kubelet``
    are built from :mod:`.controllers` / :mod:`.kubelet` when those modules exist (``with_controllers``
    / ``with_kubelet`` turn them off); extra constructor options go through ``controller_options`` /
    ``kubelet_options``."""

    def __init__(
        self,
        workdir: Path,
        *,
        bookmark_interval: float = 60.0,
        port: int = 0,
        with_controllers: bool = True,
        with_kubelet: bool = True,
        controller_options: dict[str, Any] | None = None,
        kubelet_options: dict[str, Any] | None = None,
        history_size: int = 5000,
    ) -> None:
        self.workdir = Path(workdir)
        self.store = Store(history_size=history_size)
        self.admin_token = "emu-admin-" + secrets.token_urlsafe(16)
        self.server = ApiServer(self.store, port=port, bookmark_interval=bookmark_interval)
        self.server.add_token(self.admin_token, User("emulator-admin"))
        self.with_controllers = with_controllers
        self.with_kubelet = with_kubelet
        self.controller_options = dict(controller_options or {})
        self.kubelet_options = dict(kubelet_options or {})
        self.controllers: Any = None
        self.kubelet: Any = None
        self.url = ""
        self.kubeconfig_path = self.workdir / "kubeconfig"
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> str:
        """Start everything; returns the base URL."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        for ns in ("default", "kube-system", "kube-public"):
            if self.store.get("namespaces", None, ns) is None:
                self.store.create("namespaces", {"metadata": {"name": ns}})
                self.server.after_namespace_created(ns)
        if self.with_kubelet:
            mod = _optional_module("kubelet")
            if mod is not None and hasattr(mod, "Kubelet"):
                self.kubelet = mod.Kubelet(self.store, self.workdir / "kubelet", **self.kubelet_options)
                self.kubelet.start()
                self.server.log_source = self.kubelet
                self.server.portforward_handler = _portforward_hook(self.kubelet)
        if self.with_controllers:
            mod = _optional_module("controllers")
            if mod is not None and hasattr(mod, "Controllers"):
                self.controllers = _construct(
                    mod.Controllers, self.store, self.workdir, self.controller_options
                )
                self.controllers.start()
        self.url = self.server.start()
        self.write_kubeconfig(self.kubeconfig_path)
        return self.url

    def stop(self) -> None:
        """Stop the controllers, the kubelet (killing pod processes) and the server."""
        if self.controllers is not None:
            with contextlib.suppress(Exception):
                self.controllers.stop()
        if self.kubelet is not None:
            with contextlib.suppress(Exception):
                self.kubelet.stop()
        self.server.stop()

    def __enter__(self) -> Emulator:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ helpers for tests
    def write_kubeconfig(self, path: Path, token: str | None = None, namespace: str = "default") -> Path:
        """Write a kubeconfig for ``token`` (default: admin) to ``path``."""
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "emulator",
            "preferences": {},
            "clusters": [{"name": "emulator", "cluster": {"server": self.server.url}}],
            "users": [{"name": "emulator-user", "user": {"token": token or self.admin_token}}],
            "contexts": [
                {
                    "name": "emulator",
                    "context": {"cluster": "emulator", "user": "emulator-user", "namespace": namespace},
                }
            ],
        }
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        return path

    def viewer_token(self, namespace: str = "default", name: str = "viewer") -> str:
        """A token for ``system:serviceaccount:NAMESPACE:NAME`` with the ``view`` role in
        ``namespace`` only (get/list/watch; no secrets)."""
        token = "emu-viewer-" + secrets.token_urlsafe(16)
        self.server.add_token(
            token, User(f"system:serviceaccount:{namespace}:{name}", read_only=True, namespace=namespace)
        )
        return token

    def create_namespace(self, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
        """Create a namespace (with the ``kube-root-ca.crt`` ConfigMap a real cluster adds)."""
        md: dict[str, Any] = {"name": name}
        if labels:
            md["labels"] = dict(labels)
        ns = self.store.create("namespaces", {"metadata": md})
        self.server.after_namespace_created(name)
        return ns

    def delete_namespace(self, name: str) -> None:
        """Delete a namespace and everything in it (pods go through graceful termination)."""
        self.store.delete("namespaces", None, name)

    def compact(self) -> None:
        """Forget the watch history: watches from any older resourceVersion now get 410."""
        self.store.compact()

    def api_client(self, token: str | None = None) -> Any:
        """A ``kubernetes.client.ApiClient`` for this emulator (admin unless ``token``)."""
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = self.server.url
        cfg.api_key = {"authorization": "Bearer " + (token or self.admin_token)}
        return client.ApiClient(cfg)


def _optional_module(name: str) -> Any:
    try:
        return importlib.import_module(f"{__package__}.{name}")
    except ModuleNotFoundError as e:
        if e.name and e.name.endswith(f".{name}"):
            return None
        raise


def _construct(cls: Any, store: Store, workdir: Path, options: dict[str, Any]) -> Any:
    params = inspect.signature(cls).parameters
    if "workdir" in params:
        return cls(store, workdir=workdir, **options)
    return cls(store, **options)


def _portforward_hook(kubelet: Any) -> Any:
    mod = _optional_module("portforward")
    if mod is None:
        return None
    for attr in ("make_handler", "portforward_handler_for"):
        if hasattr(mod, attr):
            return getattr(mod, attr)(kubelet)
    if hasattr(mod, "PortForwarder"):
        return mod.PortForwarder(kubelet)
    return None
