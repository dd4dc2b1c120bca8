"""Issue 16 §4 on the Kubernetes emulator: --sync puts the notebook's files in a D-sync
Secret mounted at /jt/sync (working directory, on PYTHONPATH); the server imports a module
beside the notebook and answers with it; an unchanged tree changes nothing, a changed module
rolls the pods; over a Secret's size the magic refuses in one line; --dry-run lists the files."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.errors import TiersError
from jupyter_tiers.core.model import ServiceState
from jupyter_tiers.k8s.sync_render import SYNC_HASH_ANNOTATION
from jupyter_tiers.k8s.tier import K8sTier
from tests.helpers import ipython_test_shell
from tests.k8s.conftest import GUARD, wait_for
from tests.k8s_emulator.emulator import Emulator

SERVER = """\
import http.server, os
import mymodel
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers()
        self.wfile.write((mymodel.answer() + " " + open("conf/greeting.txt").read().strip()).encode())
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("0.0.0.0", int(os.environ["JT_PORT"])), H).serve_forever()
"""


@pytest.fixture
def notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    nb = tmp_path / "nb"
    (nb / "conf").mkdir(parents=True)
    (nb / "mymodel.py").write_text("def answer():\n    return 'v1'\n")
    (nb / "conf/greeting.txt").write_text("hello\n")
    (nb / ".gitignore").write_text("*.bin\n")
    (nb / "weights.bin").write_bytes(b"\0" * 3_000_000)  # ignored: far over a Secret
    monkeypatch.chdir(nb)
    return nb


def get(url: str) -> str:
    with urllib.request.urlopen(url + "/", timeout=30) as resp:
        return resp.read().decode()


def test_module_served_from_the_synced_secret(tier: K8sTier, notebook: Path, emulator: Emulator,
                                                 k8s_namespace: str) -> None:
    ns = k8s_namespace
    service = tier.apply(tier.make_spec(SERVER, name="synced", sync=["."]))
    assert service.wait_ready(GUARD).state is ServiceState.READY, service.logs()
    assert get(service.port_forward()) == "v1 hello"
    secret = emulator.store.get("secrets", ns, "synced-sync")
    assert secret is not None and len(secret["data"]) == 3  # .gitignore, conf/greeting.txt, mymodel.py
    assert emulator.store.get("configmaps", ns, "synced-sync") is None  # the view role reads ConfigMaps
    dep = emulator.store.get("deployments", ns, "synced")
    assert dep is not None
    digest = dep["spec"]["template"]["metadata"]["annotations"][SYNC_HASH_ANNOTATION]

    tier.apply(tier.make_spec(SERVER, name="synced", sync=["."]))  # unchanged: nothing rolls
    again = emulator.store.get("deployments", ns, "synced")
    assert again is not None and again["metadata"]["generation"] == dep["metadata"]["generation"]

    (notebook / "mymodel.py").write_text("def answer():\n    return 'v2'\n")
    changed = tier.apply(tier.make_spec(SERVER, name="synced", sync=["."]))
    dep2 = emulator.store.get("deployments", ns, "synced")
    assert dep2 is not None and dep2["spec"]["template"]["metadata"]["annotations"][
        SYNC_HASH_ANNOTATION] != digest

    def answers_v2() -> bool:
        status = changed.status()
        if status.state is not ServiceState.READY or status.updated != status.desired:
            return False
        try:
            return get(changed.port_forward()) == "v2 hello"
        except OSError:
            return False

    wait_for(answers_v2, what="the rolled pods answering v2")
    # Without --sync again: the D-sync Secret goes, the pods lose the mount.
    plain = tier.apply(tier.make_spec(SERVER.replace("import mymodel", "mymodel = None"), name="synced"))
    assert emulator.store.get("secrets", ns, "synced-sync") is None
    tier.delete(plain.record)
    assert emulator.store.get("secrets", ns, "synced-sync") is None


@pytest.fixture
def ip() -> InteractiveShell:
    shell = ipython_test_shell()
    shell.run_line_magic("load_ext", "jupyter_tiers")
    return shell


def test_over_a_secret_is_one_line(ip: InteractiveShell, notebook: Path) -> None:
    (notebook / "data.csv").write_bytes(b"1," * 600_000)
    with pytest.raises(UsageError) as err:
        ip.run_cell_magic("k8s_serve", "--sync . --name toobig", SERVER)
    msg = str(err.value)
    assert "\n" not in msg and "do not fit a Kubernetes Secret" in msg and "bake them into the image" in msg
    assert Registry().list() == []


def test_dry_run_lists_synced_files(ip: InteractiveShell, notebook: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    ip.run_cell_magic("k8s_serve", "--sync . --name dry --dry-run", SERVER)
    out = capsys.readouterr().out
    assert "secretName: dry-sync" in out and "mountPath: /jt/sync" in out and "workingDir: /jt/sync" in out
    assert "# Secret dry-sync (namespace " in out and "holds the 3 files" in out
    assert "# --sync .: 3 files" in out and "#   mymodel.py  (" in out and "weights.bin" not in out
    assert Registry().list() == []


def test_bluegreen_switches_colour_on_a_changed_module(tier: K8sTier, notebook: Path,
                                                       emulator: Emulator, k8s_namespace: str) -> None:
    ns = k8s_namespace
    blue = tier.apply(tier.make_spec(SERVER, name="bgs", strategy="bluegreen", sync=["."]))
    assert blue.record.spec["deployment"] == "bgs-blue"
    assert blue.wait_ready(GUARD).state is ServiceState.READY, blue.logs()
    (notebook / "mymodel.py").write_text("def answer():\n    return 'green'\n")
    green = tier.apply(tier.make_spec(SERVER, name="bgs", strategy="bluegreen", sync=["."]))
    assert green.record.spec["deployment"] == "bgs-green"
    assert green.record.spec["sync_sha"] != blue.record.spec["sync_sha"]  # the record tells them apart
    tier.wait_switched("bgs", GUARD)
    assert emulator.store.get("secrets", ns, "bgs-blue-sync") is None
    assert emulator.store.get("secrets", ns, "bgs-green-sync") is not None
    wait_for(lambda: get_or_none(green.port_forward) == "green hello", what="green answering")
    tier.delete(green.record)


def get_or_none(port_forward: Callable[[], str]) -> str | None:
    try:
        return get(port_forward())
    except (OSError, TiersError):  # no ready pod yet, or the pod went while connecting
        return None


def test_a_viewer_of_the_namespace_cannot_read_the_synced_files(
        tier: K8sTier, notebook: Path, emulator: Emulator, k8s_namespace: str) -> None:
    """Issue 26 §4: teammates often hold the built-in ``view`` role in a shared namespace; it
    reads every ConfigMap but no Secret, so the synced files (which may hold more than code)
    are a Secret. The emulator's viewer is that role (golden 13d)."""
    from kubernetes import client

    (notebook / "conf/greeting.txt").write_text("token=s3cr3t-in-a-config\n")
    tier.apply(tier.make_spec(SERVER, name="viewed", sync=["."]))
    cfg = client.Configuration()
    cfg.host = emulator.server.url
    cfg.api_key = {"authorization": f"Bearer {emulator.viewer_token(k8s_namespace, 'teammate')}"}
    viewer = client.CoreV1Api(client.ApiClient(cfg))
    seen = viewer.list_namespaced_config_map(k8s_namespace, _preload_content=False).data.decode()
    assert "viewed-code" in seen  # the viewer does read ConfigMaps: the cell body is visible
    import base64

    encoded = base64.b64encode(b"token=s3cr3t-in-a-config\n").decode()
    assert "viewed-sync" not in seen and encoded not in seen and "s3cr3t" not in seen
    with pytest.raises(client.ApiException) as err:
        viewer.read_namespaced_secret("viewed-sync", k8s_namespace)
    assert err.value.status == 403
