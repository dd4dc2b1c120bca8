"""Pure: the rollback plan (k8s/rollback.py) from a Deployment and its ReplicaSets, as
``kubectl rollout undo`` picks the target, plus the code and env checks of jupyter-tiers."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from jupyter_tiers.core.errors import TiersError
from jupyter_tiers.k8s.rollback import code_key, plan_rollback, revisions

UID = "dep-uid"


def template(body: str, env: str | None = None, sync: str | None = None) -> dict[str, Any]:
    annotations = {"jupyter-tiers/body-hash": body}
    if env:
        annotations["jupyter-tiers/env-hash"] = env
    if sync:
        annotations["jupyter-tiers/sync-hash"] = sync
    return {"metadata": {"labels": {"app.kubernetes.io/name": "web"}, "annotations": annotations},
            "spec": {"containers": [{"name": "server", "image": f"img:{body}"}]}}


def rs(revision: int, tmpl: dict[str, Any], owner: str = UID) -> dict[str, Any]:
    t = copy.deepcopy(tmpl)
    t["metadata"]["labels"]["pod-template-hash"] = f"h{revision}"
    return {"metadata": {"name": f"web-h{revision}", "ownerReferences": [{"uid": owner}],
                         "annotations": {"deployment.kubernetes.io/revision": str(revision)}},
            "spec": {"template": t}}


def deployment(revision: int, tmpl: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "web", "uid": UID,
                         "annotations": {"deployment.kubernetes.io/revision": str(revision)}},
            "spec": {"template": copy.deepcopy(tmpl)}}


A, B, C = template("aaaa"), template("bbbb"), template("cccc")
HISTORY = [rs(1, A), rs(2, B), rs(3, C), rs(9, A, owner="someone-else")]


def test_the_default_is_the_revision_before_the_current() -> None:
    plan = plan_rollback("web", deployment(3, C), HISTORY)
    assert (plan.revision, plan.current) == (2, 3)
    assert plan.template == B  # pod-template-hash dropped, as kubectl does
    assert plan.code_changes and plan.code_key == "bbbb.-"


def test_an_explicit_revision_and_the_current_one() -> None:
    assert plan_rollback("web", deployment(3, C), HISTORY, 1).template == A
    same = plan_rollback("web", deployment(3, C), HISTORY, 3)
    assert same.revision == same.current == 3 and not same.code_changes


def test_only_the_deployments_own_replicasets_count() -> None:
    assert sorted(revisions(deployment(3, C), HISTORY)) == [1, 2, 3]
    with pytest.raises(TiersError, match=r"no revision 9 \(revisions kept: 1, 2, 3"):
        plan_rollback("web", deployment(3, C), HISTORY, 9)


def test_no_earlier_revision() -> None:
    with pytest.raises(TiersError, match="no revision before 1 to roll back to"):
        plan_rollback("web", deployment(1, A), [rs(1, A)])
    with pytest.raises(TiersError, match="has no revision yet"):
        plan_rollback("web", {"metadata": {"uid": UID}, "spec": {}}, [])
    with pytest.raises(TiersError, match="a whole number from 1"):
        plan_rollback("web", deployment(3, C), HISTORY, 0)


def test_other_env_values_are_refused() -> None:
    old, new = template("aaaa", env="e1"), template("aaaa", env="e2")
    with pytest.raises(TiersError, match="other --env values"):
        plan_rollback("web", deployment(2, new), [rs(1, old), rs(2, new)])
    now = template("bbbb", env="e1")  # other code, the same env values: fine
    plan = plan_rollback("web", deployment(2, now), [rs(1, old), rs(2, now)])
    assert plan.template == old


def test_code_key_names_body_and_sync() -> None:
    assert code_key(template("ab12", sync="cd34")) == "ab12.cd34"
    assert code_key({}) == "-.-"
    same_code = template("cccc")
    same_code["spec"]["containers"][0]["image"] = "img:other"  # only the image changed
    assert not plan_rollback("web", deployment(2, C), [rs(1, same_code), rs(2, C)]).code_changes


def test_the_local_tier_has_no_history_to_roll_back(tmp_path: Any) -> None:
    from jupyter_tiers.config.profiles import Profile
    from jupyter_tiers.config.registry import JobRecord, Registry
    from jupyter_tiers.core.errors import Unsupported
    from jupyter_tiers.local.serve_tier import LocalServeTier

    tier = LocalServeTier(Profile(name="laptop", tier="local", settings={"workdir": str(tmp_path)}),
                          Registry(tmp_path / "registry.sqlite"))
    record = JobRecord(profile="laptop", tier="local", job_id="web", name="web", kind="service")
    with pytest.raises(Unsupported, match="rollback needs a Kubernetes profile"):
        tier.rollback(record)
