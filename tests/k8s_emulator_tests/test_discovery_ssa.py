"""Discovery through DynamicClient and server-side apply semantics."""

from __future__ import annotations

import json

import pytest
from kubernetes import client, dynamic
from kubernetes.dynamic.exceptions import ConflictError, ResourceNotFoundError, UnprocessibleEntityError

from .conftest import deployment


def _dyn(api: client.ApiClient, tmp_path) -> dynamic.DynamicClient:
    return dynamic.DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))


def test_discovery_resolves_served_kinds(api, tmp_path):
    d = _dyn(api, tmp_path)
    assert d.resources.get(api_version="apps/v1", kind="Deployment").subresources.keys() >= {
        "scale",
        "status",
    }
    for kind in ("Service", "ConfigMap", "Pod", "Secret", "Event", "Namespace", "Endpoints"):
        assert d.resources.get(api_version="v1", kind=kind).kind == kind
    hpa = d.resources.get(api_version="autoscaling/v2", kind="HorizontalPodAutoscaler")
    assert hpa.namespaced
    with pytest.raises(ResourceNotFoundError):
        d.resources.get(api_version="v1", kind="NoSuchKind")


def test_version_and_api(api):
    assert client.VersionApi(api).get_code().git_version.startswith("v1.28")
    assert client.CoreApi(api).get_api_versions().versions == ["v1"]


def test_apply_create_reapply_change(api, ns, tmp_path):
    dep = _dyn(api, tmp_path).resources.get(api_version="apps/v1", kind="Deployment")
    first = dep.server_side_apply(
        body=deployment("web"), namespace=ns, field_manager="jupyter-tiers", force_conflicts=True
    )
    assert first.metadata.generation == 1
    mf = first.to_dict()["metadata"]["managedFields"]
    assert [(m["manager"], m["operation"]) for m in mf] == [("jupyter-tiers", "Apply")]
    assert "f:replicas" in mf[0]["fieldsV1"]["f:spec"]
    spec = first.spec
    assert spec.strategy.rollingUpdate.maxSurge == "25%" and spec.revisionHistoryLimit == 10
    assert spec.progressDeadlineSeconds == 600
    c = spec.template.spec.containers[0]
    assert c.ports[0].protocol == "TCP" and c.readinessProbe.httpGet.scheme == "HTTP"
    assert c.terminationMessagePath == "/dev/termination-log"
    assert spec.template.spec.dnsPolicy == "ClusterFirst"

    again = dep.server_side_apply(body=deployment("web"), namespace=ns, field_manager="jupyter-tiers")
    assert again.metadata.resourceVersion == first.metadata.resourceVersion
    assert again.metadata.generation == 1

    changed = dep.server_side_apply(
        body=deployment("web", env_value="2"),
        namespace=ns,
        field_manager="jupyter-tiers",
        force_conflicts=True,
    )
    assert changed.metadata.generation == 2
    assert changed.spec.template.spec.containers[0].env[0].value == "2"


def test_apply_conflicts_and_takeover(api, ns, tmp_path):
    dep = _dyn(api, tmp_path).resources.get(api_version="apps/v1", kind="Deployment")
    dep.server_side_apply(body=deployment("web"), namespace=ns, field_manager="jupyter-tiers")
    minimal = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 3},
    }
    with pytest.raises(ConflictError) as exc:
        dep.server_side_apply(body=minimal, namespace=ns, field_manager="other-tool")
    assert exc.value.status == 409
    assert '"message":"Apply failed with 1 conflict: conflict with \\"jupyter-tiers\\": .spec.replicas"' in (
        exc.value.body
    )
    same = {**minimal, "spec": {"replicas": 2}}
    co = dep.server_side_apply(body=same, namespace=ns, field_manager="other-tool")
    owners = [
        m["manager"]
        for m in co.to_dict()["metadata"]["managedFields"]
        if "f:replicas" in (m["fieldsV1"].get("f:spec") or {})
    ]
    assert sorted(owners) == ["jupyter-tiers", "other-tool"]
    took = dep.server_side_apply(body=minimal, namespace=ns, field_manager="other-tool", force_conflicts=True)
    assert took.spec.replicas == 3 and took.metadata.generation == 2
    with pytest.raises(ConflictError) as exc:
        dep.server_side_apply(body=deployment("web"), namespace=ns, field_manager="jupyter-tiers")
    assert 'conflict with \\"other-tool\\"' in exc.value.body


def test_apply_conflict_with_scale_subresource(api, ns, tmp_path):
    dep = _dyn(api, tmp_path).resources.get(api_version="apps/v1", kind="Deployment")
    apps = client.AppsV1Api(api)
    dep.server_side_apply(body=deployment("web"), namespace=ns, field_manager="jupyter-tiers")
    scale = apps.read_namespaced_deployment_scale("web", ns)
    assert scale.spec.replicas == 2 and scale.status.selector == "app.kubernetes.io/name=web"
    assert apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 3}}).spec.replicas == 3
    got = apps.read_namespaced_deployment("web", ns)
    assert got.metadata.generation == 2
    entry = next(m for m in got.metadata.managed_fields if m.subresource == "scale")
    assert (entry.manager, entry.operation, entry.time) == ("OpenAPI-Generator", "Update", None)
    with pytest.raises(ConflictError) as exc:
        dep.server_side_apply(body=deployment("web"), namespace=ns, field_manager="jupyter-tiers")
    assert (
        'conflict with \\"OpenAPI-Generator\\" with subresource \\"scale\\" using apps/v1: .spec.replicas'
        in exc.value.body
    )
    without = deployment("web")
    del without["spec"]["replicas"]
    kept = dep.server_side_apply(body=without, namespace=ns, field_manager="jupyter-tiers")
    assert kept.spec.replicas == 3


def test_apply_without_field_manager_is_422(api, ns):
    apps = client.AppsV1Api(api)
    with pytest.raises(client.ApiException) as exc:
        apps.patch_namespaced_deployment(
            "web", ns, deployment("web"), _content_type="application/apply-patch+yaml"
        )
    assert exc.value.status == 422
    assert "fieldManager: Required value: is required for apply patch" in exc.value.body
    assert apps.list_namespaced_deployment(ns).items == []


def test_apply_unknown_field_is_500_and_typed_api_apply_works(api, ns, tmp_path):
    dep = _dyn(api, tmp_path).resources.get(api_version="apps/v1", kind="Deployment")
    bad = deployment("web")
    bad["spec"]["replicaz"] = 1
    with pytest.raises(Exception) as exc:
        dep.server_side_apply(body=bad, namespace=ns, field_manager="jupyter-tiers")
    assert exc.value.status == 500
    assert (
        f"({ns}/web; apps/v1, Kind=Deployment): .spec.replicaz: field not declared in schema"
        in exc.value.body
    )
    apps = client.AppsV1Api(api)
    made = apps.patch_namespaced_deployment(
        "web",
        ns,
        deployment("web"),
        field_manager="jupyter-tiers",
        _content_type="application/apply-patch+yaml",
    )
    assert made.metadata.generation == 1


def test_invalid_objects_are_422(api, ns, tmp_path):
    dep = _dyn(api, tmp_path).resources.get(api_version="apps/v1", kind="Deployment")
    neg = deployment("neg", replicas=-1)
    with pytest.raises(UnprocessibleEntityError) as exc:
        dep.server_side_apply(body=neg, namespace=ns, field_manager="jupyter-tiers")
    assert "spec.replicas: Invalid value: -1: must be greater than or equal to 0" in exc.value.body
    hpa = _dyn(api, tmp_path).resources.get(api_version="autoscaling/v2", kind="HorizontalPodAutoscaler")
    body = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "inv"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 5,
            "maxReplicas": 3,
        },
    }
    with pytest.raises(UnprocessibleEntityError) as exc:
        hpa.server_side_apply(body=body, namespace=ns, field_manager="jupyter-tiers")
    assert (
        'HorizontalPodAutoscaler.autoscaling \\"inv\\" is invalid: spec.maxReplicas: Invalid value: 3: '
        "must be greater than or equal to `minReplicas`"
    ) in exc.value.body


def test_dry_run_all_validates_and_stores_nothing(api, ns, bare):
    """``dryRun=All`` (create and server-side apply): the answer a real write would get,
    defaults filled in, validation and admission run, but nothing stored and no watch event."""
    from kubernetes.client.exceptions import ApiException

    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    before = bare.store.list("deployments", ns)
    body = deployment("web")
    created = apps.patch_namespaced_deployment(
        "web", ns, body, field_manager="jupyter-tiers", force=True, dry_run="All",
        _content_type="application/apply-patch+yaml")
    assert created.metadata.uid and created.metadata.generation == 1
    assert created.spec.revision_history_limit == 10  # defaulted as by a real write
    assert bare.store.list("deployments", ns) == before == []
    cm = core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}, "data": {"k": "v"}}, dry_run="All")
    assert cm.metadata.name == "c" and bare.store.get("configmaps", ns, "c") is None
    # Errors are the real ones: validation still runs.
    bad = deployment("web")
    bad["spec"]["replicas"] = -1
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment("web", ns, bad, field_manager="m", dry_run="All",
                                         _content_type="application/apply-patch+yaml")
    assert err.value.status == 422 and "spec.replicas" in err.value.body
    # An existing object: 200 with the merged object, the stored one unchanged.
    real = apps.patch_namespaced_deployment("web", ns, body, field_manager="jupyter-tiers", force=True,
                                            _content_type="application/apply-patch+yaml")
    changed = deployment("web", env_value="2")
    dry = apps.patch_namespaced_deployment("web", ns, changed, field_manager="jupyter-tiers", force=True,
                                           dry_run="All", _content_type="application/apply-patch+yaml")
    assert dry.spec.template.spec.containers[0].env[0].value == "2"
    stored = bare.store.get("deployments", ns, "web")
    assert stored["metadata"]["resourceVersion"] == real.metadata.resource_version
    assert stored["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] != "2"
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "d"}}, dry_run="Some")
    message = json.loads(err.value.body)["message"]
    assert err.value.status == 422 and message.endswith('dryRun: Unsupported value: []string{"Some"}: '
                                                         'supported values: "All"'), message
