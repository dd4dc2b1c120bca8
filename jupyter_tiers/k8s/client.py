"""The one place that builds the official ``kubernetes`` client, and the error mapping around it.

The client is imported lazily (importing it costs most of a second) and built once per tier.
Every call goes through :meth:`KubeClient.call`, which turns the client's exceptions into our
one-line errors: :class:`ApiError` with the status and the API's reason, or
:class:`ApiUnreachable` when no answer came.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ..core.errors import ApiError, ApiUnreachable, ConfigError
from .errors import api_error_message

T = TypeVar("T")

FIELD_MANAGER = "jupyter-tiers"
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"


class KubeClient:
    """Typed API objects for one kubeconfig context, created on first use."""

    def __init__(self, settings: Mapping[str, Any], *, profile: str = "", source: str = "") -> None:
        self.settings = settings
        self.profile = profile
        self.source = source or "tiers.yaml"
        self.request_timeout = float(settings.get("request_timeout", 30.0))
        self._lock = threading.Lock()
        self._api: Any = None
        self.default_namespace = "default"
        self.requests = 0  # API requests made through call() (the benchmark reads it)

    @property
    def api(self) -> Any:
        """The ``kubernetes.client.ApiClient`` (kubeconfig, else in-cluster config)."""
        with self._lock:
            if self._api is None:
                self._api = self._load()
            return self._api

    def _load(self) -> Any:
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException

        kubeconfig = self.settings.get("kubeconfig")
        context = self.settings.get("context")
        configuration = client.Configuration()
        try:
            config.load_kube_config(
                config_file=str(_expand(kubeconfig)) if kubeconfig else None,
                context=context, client_configuration=configuration,
            )
            _, active = config.list_kube_config_contexts(
                config_file=str(_expand(kubeconfig)) if kubeconfig else None)
            if context is None and active:
                self.default_namespace = active.get("context", {}).get("namespace") or "default"
        except (ConfigException, OSError, TypeError) as exc:
            if kubeconfig or context:
                key = f"profiles.{self.profile}.{'context' if context else 'kubeconfig'}"
                raise ConfigError(self.source, key, f"cannot load the kubeconfig: {exc}") from None
            try:
                config.load_incluster_config(client_configuration=configuration)
            except ConfigException:
                raise ConfigError(self.source, f"profiles.{self.profile}",
                                  "no kubeconfig found (~/.kube/config or $KUBECONFIG) and not "
                                  "running inside a cluster; set kubeconfig: in the profile") from None
        return client.ApiClient(configuration)

    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    def apps(self) -> Any:
        from kubernetes import client

        return client.AppsV1Api(self.api)

    def autoscaling(self) -> Any:
        from kubernetes import client

        return client.AutoscalingV2Api(self.api)

    def custom(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self.api)

    def networking(self) -> Any:
        from kubernetes import client

        return client.NetworkingV1Api(self.api)

    def call(self, fn: Callable[..., T], *args: Any, verb: str, resource: str,
             namespace: str | None = None, **kwargs: Any) -> T:
        """Run one API call; errors become ApiError / ApiUnreachable with a one-line message."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        kwargs.setdefault("_request_timeout", self.request_timeout)
        self.requests += 1
        try:
            return fn(*args, **kwargs)
        except ApiException as exc:
            status = int(exc.status or 0)
            message = api_error_message(status, exc.body, verb=verb, resource=resource,
                                        namespace=namespace)
            if status == 0:
                raise ApiUnreachable(message) from None
            raise ApiError(message, status) from None
        except (HTTPError, OSError) as exc:
            host = getattr(self.api.configuration, "host", "the API server")
            raise ApiUnreachable(f"Kubernetes API at {host} did not answer: {_short(exc)}") from None


def _expand(path: str) -> str:
    import os

    return os.path.expanduser(os.path.expandvars(path))


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "reason", None) or exc)
    return text.splitlines()[0][:200] if text else type(exc).__name__


def is_not_found(exc: BaseException) -> bool:
    return isinstance(exc, ApiError) and exc.status == 404
