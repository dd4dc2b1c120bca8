"""Issue 21 section 1: ``doctor`` on Kubernetes profiles against the emulator: the admin's profile
passes every access review; a view-only ServiceAccount's profile lists exactly the verbs it lacks
(and --suggest-role prints the Role granting them); a missing namespace is a FAIL with the fix;
``%tiers doctor`` prints the same report."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from jupyter_tiers.config.profiles import ProjectFileRefused, load_config
from jupyter_tiers.doctor import run_doctor
from jupyter_tiers.doctor.k8s_checks import TIER_ACCESS, shown_access
from jupyter_tiers.doctor.model import Check, Status
from jupyter_tiers.doctor.render import render_text
from jupyter_tiers.faces import tiers_command
from tests.k8s.conftest import PROFILE, profile_settings, write_tiers_yaml
from tests.k8s_emulator.emulator import Emulator

# What the built-in ``view`` ClusterRole lacks of what the tier uses: every write, and port-forward.
VIEWER_MISSING = [a for a in TIER_ACCESS if a[2] in ("create", "patch", "delete")]


def _checks(name: str = PROFILE, **options: bool) -> tuple[dict[str, Check], str]:
    report = run_doctor(load_config(), [name], **options)
    checks = {c.name: c for c in report.profiles[0].checks}
    return checks, report.profiles[0].extra


def test_the_admins_profile_may_do_everything(k8s_namespace: str) -> None:
    checks, _ = _checks()
    access = checks["access"]
    assert access.status is Status.OK and access.data["missing"] == [], access
    assert checks["api server"].status is Status.OK and "Kubernetes v1." in checks["api server"].detail
    assert checks["namespace"].status is Status.OK


def test_a_view_only_account_lists_exactly_the_missing_verbs(
        emulator: Emulator, k8s_namespace: str, tmp_path: Path, isolated: Path) -> None:
    kubeconfig = emulator.write_kubeconfig(tmp_path / "viewer.kubeconfig",
                                           emulator.viewer_token(k8s_namespace), k8s_namespace)
    write_tiers_yaml(isolated, {"viewer": {"tier": "kubernetes",
                                           **profile_settings(emulator, k8s_namespace, kubeconfig)}},
                     default="viewer")
    checks, extra = _checks("viewer", suggest_role=True)
    access = checks["access"]
    assert access.status is Status.FAIL
    assert access.data["missing"] == [shown_access(*a) for a in VIEWER_MISSING]
    assert "create pods/portforward" in access.detail
    # It may not read namespaces (cluster scope), so their existence is a warning, not a guess.
    assert checks["namespace"].status is Status.WARN
    role = yaml.safe_load(extra.split("# bind it")[0])
    assert role["metadata"]["namespace"] == k8s_namespace
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}
    assert granted == set(VIEWER_MISSING)
    assert "create rolebinding jupyter-tiers --role=jupyter-tiers" in extra


def test_a_missing_namespace_is_a_fail_with_the_fix(emulator: Emulator, isolated: Path) -> None:
    write_tiers_yaml(isolated, {"gone": {"tier": "kubernetes", **profile_settings(emulator, "no-such-ns")}},
                     default="gone")
    checks, _ = _checks("gone")
    namespace = checks["namespace"]
    assert namespace.status is Status.FAIL
    assert "namespace 'no-such-ns' does not exist" in namespace.detail
    assert "kubectl create namespace no-such-ns" in namespace.fix


def test_the_magic_prints_the_same_report(k8s_namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert tiers_command.run(["doctor", PROFILE], shell=object()) is None
    out = capsys.readouterr().out
    assert out.startswith(f"{PROFILE} (kubernetes)\n") and "  OK    access: all " in out
    report = run_doctor(load_config(), [PROFILE])
    assert [line.split(":")[0] for line in out.splitlines()] == \
        [line.split(":")[0] for line in render_text(report).splitlines()]


def test_an_exec_plugin_of_a_project_files_profile_is_never_run(
        emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ./tiers.yaml that came with a cloned repository picks a context whose user runs an exec
    credential plugin: the doctor names it and runs nothing (the plugin would leave a marker)."""
    marker = tmp_path / "plugin-ran"
    plugin = tmp_path / "plugin.sh"
    plugin.write_text(f"#!/bin/sh\ntouch {marker}\necho '{{}}'\n")
    plugin.chmod(0o755)
    kubeconfig = tmp_path / "exec.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "mine",
        "clusters": [{"name": "emu", "cluster": {"server": emulator.server.url}}],
        "contexts": [{"name": "mine", "context": {"cluster": "emu", "user": "me"}},
                     {"name": "theirs", "context": {"cluster": "emu", "user": "plugin"}}],
        "users": [{"name": "me", "user": {"token": emulator.admin_token}},
                  {"name": "plugin", "user": {"exec": {
                      "apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(plugin)}}}]}))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("JUPYTER_TIERS_CONFIG")
    (tmp_path / "tiers.yaml").write_text(yaml.safe_dump(  # cwd is tmp_path: a project file
        {"profiles": {"cloned": {"tier": "kubernetes", "context": "theirs", "namespace": "default"}}}))
    # Since the allowlist (issue 26) such a profile is refused whole, before the doctor starts:
    # a project file's own kubernetes profile would use the user's kubeconfig.
    with pytest.raises(ProjectFileRefused) as info:
        _checks("cloned")
    assert "profiles.cloned.context" in str(info.value)
    assert "own kubernetes profile" in str(info.value)
    assert not marker.exists()
