"""Every route refuses strangers, mutations need the XSRF token, and no handler method dodges
Jupyter's authentication (JupyterServerAuthWarning fails these tests, see conftest)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from jupyter_server.serverapp import ServerWebApplication
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from jupyter_tiers.faces.server.handlers import AUTH_RESOURCE, TiersWebSocket, handler_table
from tests.server.util import body

_METHODS = ("get", "post", "put", "patch", "delete")


def _concrete(pattern: str) -> str:
    """A URL path for a route pattern: every capture group filled with a plausible value."""
    return re.sub(r"\((?:[^()]|\([^()]*\))*\)", lambda m: "cancel" if "cancel" in m.group(0) else "p1",
                  pattern).rstrip("$")


def _own_methods(handler: type) -> list[str]:
    return [m for m in _METHODS if m in vars(handler) or any(
        m in vars(base) for base in handler.__mro__ if base.__module__.startswith("jupyter_tiers"))]


def test_every_route_is_checked_and_decorated() -> None:
    routes = handler_table("/")
    assert len(routes) >= 8
    for pattern, handler in routes:
        assert handler.auth_resource == AUTH_RESOURCE, pattern
        methods = _own_methods(handler)
        assert methods, f"{pattern}: no HTTP method"
        # jupyter_server's own check: no method without @web.authenticated / @ws_authenticated.
        assert ServerWebApplication._check_handler_auth(None, pattern, handler) == [], pattern


async def test_every_route_refuses_a_request_without_a_token(
        jp_serverapp: Any, http_server_client: Any, jp_base_url: str, jp_http_port: int) -> None:
    refused = 0
    for pattern, handler in handler_table(jp_base_url):
        path = _concrete(pattern)
        if issubclass(handler, TiersWebSocket):
            with pytest.raises(HTTPClientError) as err:
                await websocket_connect(HTTPRequest(f"ws://127.0.0.1:{jp_http_port}{path}"))
            assert err.value.code == 403, path
            refused += 1
            continue
        for method in _own_methods(handler):
            # A matching XSRF cookie and header, so that it is the missing login that refuses.
            response = await http_server_client.fetch(
                path, method=method.upper(), raise_error=False, follow_redirects=False,
                headers={"Cookie": "_xsrf=x1", "X-XSRFToken": "x1"},
                body=b"{}" if method in ("post", "put", "patch") else None)
            assert response.code == 403, f"{method.upper()} {path}: {response.code}"
            assert "error" in body(response)
            refused += 1
    assert refused >= 9


async def test_a_wrong_token_is_refused_too(jp_serverapp: Any, http_server_client: Any,
                                            jp_base_url: str) -> None:
    response = await http_server_client.fetch(
        f"{jp_base_url}jupyter-tiers/api/profiles", headers={"Authorization": "token not-the-token"},
        raise_error=False)
    assert response.code == 403


async def test_cookie_authenticated_post_without_xsrf_header_is_refused(
        jp_serverapp: Any, http_server_client: Any, jp_base_url: str, tiers_config: Any) -> None:
    token = jp_serverapp.identity_provider.token
    # Log in the way a browser does: the login page sets the _xsrf cookie, the token once in
    # the URL sets the login cookie.
    cookies: dict[str, str] = {}
    for url in (f"{jp_base_url}login", f"{jp_base_url}jupyter-tiers/api/profiles?token={token}"):
        page = await http_server_client.fetch(url, raise_error=False, follow_redirects=False)
        assert page.code == 200, url
        for header in page.headers.get_list("Set-Cookie"):
            name, _, rest = header.partition("=")
            cookies[name] = rest.split(";", 1)[0]
    assert "_xsrf" in cookies and any(n.startswith("username-") for n in cookies), cookies
    cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
    url = f"{jp_base_url}jupyter-tiers/api/jobs/box/41/cancel"
    # The cookie alone authenticates a GET ...
    ok = await http_server_client.fetch(f"{jp_base_url}jupyter-tiers/api/profiles",
                                        headers={"Cookie": cookie}, raise_error=False)
    assert ok.code == 200
    # ... but a POST without the X-XSRFToken header is refused before it reaches the handler,
    refused = await http_server_client.fetch(url, method="POST", body=b"", headers={"Cookie": cookie},
                                             raise_error=False)
    assert refused.code == 403
    assert "_xsrf" in body(refused)["error"]
    # and with the header it gets through to the handler (no such job: 404).
    passed = await http_server_client.fetch(
        url, method="POST", body=b"", raise_error=False,
        headers={"Cookie": cookie, "X-XSRFToken": cookies["_xsrf"]})
    assert passed.code == 404, passed.body


def test_the_auth_warning_is_an_error_here(jp_serverapp: Any) -> None:
    """Proof that the filter is on: a route without @web.authenticated would fail the tests."""
    from jupyter_server.base.handlers import APIHandler
    from jupyter_server.utils import JupyterServerAuthWarning

    class Careless(APIHandler):
        def get(self) -> None:
            self.finish("{}")

    with pytest.raises(JupyterServerAuthWarning):
        jp_serverapp.web_app.add_handlers(".*$", [("/careless", Careless)])


async def test_no_route_counts_as_the_users_activity(
        jp_serverapp: Any, http_server_client: Any, jp_base_url: str, jp_auth_header: dict[str, str]) -> None:
    """Issue 30: a hub's idle culler reads the server's last activity; the sidebar polls our routes
    while nobody looks, so none of them may move it (``_track_activity``). A route of Jupyter's
    own (the contents API) does move it: the check can fail."""
    from datetime import datetime, timezone

    settings = jp_serverapp.web_app.settings
    old = datetime(2000, 1, 1, tzinfo=timezone.utc)
    settings["api_last_activity"] = old
    headers = {**jp_auth_header, "Cookie": "_xsrf=x1", "X-XSRFToken": "x1"}
    called = 0
    for pattern, handler in handler_table(jp_base_url):
        if issubclass(handler, TiersWebSocket):
            continue
        path = _concrete(pattern)
        for method in _own_methods(handler):
            await http_server_client.fetch(path, method=method.upper(), raise_error=False,
                                           follow_redirects=False, headers=headers,
                                           body=b"{}" if method in ("post", "put", "patch") else None)
            called += 1
    assert called >= 8
    assert settings["api_last_activity"] == old
    await http_server_client.fetch(f"{jp_base_url}api/contents", headers=headers)
    assert settings["api_last_activity"] > old
