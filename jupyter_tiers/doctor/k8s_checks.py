"""Pure judgement of a Kubernetes profile's probes (:mod:`.k8s_probe`): kubeconfig, API server,
namespace, access reviews (with the Role that would grant what is missing), image pull secrets,
GPU nodes and the metrics API."""

from __future__ import annotations

from collections.abc import Sequence

from .k8s_probe import TIER_ACCESS, K8sProbe
from .model import Check, fail, ok, skip, warn

LATER = ("api server", "namespace", "access", "image pull secrets", "gpus", "metrics api")


def shown_access(group: str, resource: str, verb: str) -> str:
    return f"{verb} {resource}" + (f".{group}" if group else "")


def role_yaml(missing: Sequence[tuple[str, str, str]], namespace: str, name: str = "jupyter-tiers") -> str:
    """A Role (and how to bind it) granting exactly ``missing`` in ``namespace``: one rule per
    (group, resource), verbs in the order the tier needs them."""
    rules: dict[tuple[str, str], list[str]] = {}
    for group, resource, verb in missing:
        verbs = rules.setdefault((group, resource), [])
        if verb not in verbs:
            verbs.append(verb)
    lines = ["apiVersion: rbac.authorization.k8s.io/v1", "kind: Role", "metadata:",
             f"  name: {name}", f"  namespace: {namespace}", "rules:"]
    for (group, resource), verbs in rules.items():
        lines += [f"- apiGroups: [\"{group}\"]", f"  resources: [\"{resource}\"]",
                  f"  verbs: [{', '.join(verbs)}]"]
    lines.append(f"# bind it: kubectl -n {namespace} create rolebinding {name} --role={name} "
                 "--user=YOUR-USER (or --serviceaccount=NAMESPACE:NAME)")
    return "\n".join(lines) + "\n"


def k8s_checks(p: K8sProbe) -> list[Check]:
    checks: list[Check] = []
    where = f"context {p.context!r}" if p.context else "the current context"
    exec_note = f"; its user runs the exec plugin {p.exec_command!r}" if p.exec_command else ""
    if p.config_error:
        return [fail("kubeconfig", p.config_error, "fix the profile's kubeconfig/context "
                     "(kubectl config get-contexts lists them)"),
                *[skip(n, "no kubeconfig") for n in LATER]]
    if p.exec_refused:
        return [warn("kubeconfig", f"{p.kubeconfig}: {where}{exec_note}, not run: the profile "
                     f"comes from the project file {p.exec_refused}",
                     "run the doctor where the profile comes from your own tiers.yaml, or check "
                     "the plugin by hand"),
                *[skip(n, "the exec plugin was not run") for n in LATER]]
    checks.append(ok("kubeconfig", f"{p.kubeconfig}: {where}{exec_note}"))
    if p.api_error:
        down = fail("api server", p.api_error, "check the cluster address in the kubeconfig and "
                    "that it is reachable (VPN? expired credentials?)")
        return [*checks, down, *[skip(n, "the API server did not answer") for n in LATER[1:]]]
    checks.append(ok("api server", f"{p.server} answers: Kubernetes {p.version}"))
    if p.namespace_status == 404:
        checks.append(fail("namespace", f"namespace {p.namespace!r} does not exist",
                           f"ask the admins for it, or create it: kubectl create namespace {p.namespace} "
                           "(or set the profile's namespace to one you have)"))
    elif p.namespace_status == 403:
        checks.append(warn("namespace", f"{p.namespace!r}: you may not read namespaces, so its "
                           "existence is not checked"))
    elif p.namespace_status == 200:
        checks.append(ok("namespace", f"{p.namespace!r} exists"))
    else:
        checks.append(warn("namespace", f"{p.namespace!r}: {p.namespace_error or 'not checked'}"))
    if p.review_error:
        checks.append(warn("access", f"access reviews failed: {p.review_error}",
                           "check by hand: kubectl auth can-i --list -n " + p.namespace))
    else:
        missing = [a for a in TIER_ACCESS if not p.allowed.get(a, False)]
        data = {"missing": [shown_access(*a) for a in missing]}
        if missing:
            checks.append(fail("access", f"{len(missing)} of {len(TIER_ACCESS)} missing in "
                               f"{p.namespace}: " + ", ".join(shown_access(*a) for a in missing),
                               "ask the namespace's admins to bind a Role granting them "
                               "(jupyter tiers doctor --suggest-role prints one)", **data))
        else:
            checks.append(ok("access", f"all {len(TIER_ACCESS)} the tier uses, in {p.namespace}", **data))
    for name, status in p.pull_secrets.items():
        if status == 200:
            checks.append(ok("image pull secrets", f"{name} exists"))
        elif status == 404:
            checks.append(fail("image pull secrets", f"{name} does not exist in {p.namespace}",
                               f"create it (kubectl -n {p.namespace} create secret docker-registry "
                               f"{name} ...) or remove it from image_pull_secrets"))
        else:
            checks.append(warn("image pull secrets", f"{name}: cannot read secrets here (HTTP {status}), "
                               "not checked"))
    if p.gpu_nodes is None:
        checks.append(warn("gpus", f"nodes not listed ({p.nodes_error or 'no permission'})"))
    else:
        checks.append(ok("gpus", f"{p.gpu_nodes} of {p.nodes} nodes have nvidia.com/gpu allocatable "
                         f"({p.gpus} GPUs)", nodes=p.nodes, gpu_nodes=p.gpu_nodes, gpus=p.gpus))
    if p.metrics_api:
        checks.append(ok("metrics api", "metrics.k8s.io is served (autoscaling works)"))
    else:
        checks.append(warn("metrics api", "metrics.k8s.io is not served: --autoscale (HPA) cannot "
                           "read CPU use", "ask the admins for metrics-server"))
    return checks
