"""The jupyter-server extension: a REST + WebSocket API under ``{base_url}jupyter-tiers/api/``
for the JupyterLab "Tiers" sidebar, backed by one shared watcher (the hub) per server process.

Enabled by ``jupyter-config/jupyter_server_config.d/jupyter_tiers.json`` (installed with the
package); the contract is in ``API.md`` beside this file.
"""

from __future__ import annotations

from typing import Any

from ... import api
from ...app import actions
from .hub import Hub


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Add the handlers and start the (idle until listened to) hub."""
    # Imported here: jupyter-server imports this package to list extensions, enabled or not.
    # lazy: heavy: tornado/jupyter_server, only when the server loads the extension
    from .handlers import handler_table
    # The server has no one to ask for a login node's one-time code (and a terminal it was
    # started from must not be asked silently): such profiles fail at once with that reason.
    api.refuse_prompts("the Jupyter server (the Tiers sidebar) cannot ask for it")

    web_app = serverapp.web_app
    hub = web_app.settings.get("jupyter_tiers_hub")
    if hub is None:
        hub = web_app.settings["jupyter_tiers_hub"] = Hub(gone=actions.gone_profiles)
    web_app.add_handlers(".*$", handler_table(web_app.settings["base_url"]))
    serverapp.log.info("jupyter-tiers: API at %sjupyter-tiers/api/", web_app.settings["base_url"])


# The name jupyter_server looked for before 2.0.
load_jupyter_server_extension = _load_jupyter_server_extension


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "jupyter_tiers.faces.server"}]
