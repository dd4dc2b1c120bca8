"""The emulator's SelfSubjectAccessReview against the real API server's answers
(k8s-golden/13d-access-reviews-view-only.json): a ServiceAccount bound to the built-in ``view``
ClusterRole in its namespace, then the admin. The SelfSubjectRulesReview step of that transcript
is not emulated (the doctor does not use it)."""

from __future__ import annotations

import json

from kubernetes import client

from tests.k8s_emulator.emulator import Emulator
from tests.k8s_emulator_tests.conftest import GOLDEN

REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def _client(bare: Emulator, token: str) -> client.AuthorizationV1Api:
    cfg = client.Configuration()
    cfg.host = bare.server.url
    cfg.api_key = {"authorization": f"Bearer {token}"}
    return client.AuthorizationV1Api(client.ApiClient(cfg))


def test_access_reviews_answer_as_the_real_api_does(bare: Emulator) -> None:
    steps = json.loads((GOLDEN / "13d-access-reviews-view-only.json").read_text())["steps"]
    reviews = [s for s in steps if s["request"]["path"] == REVIEWS]
    assert len(reviews) >= 10
    viewer = _client(bare, bare.viewer_token("golden", "viewer"))
    admin = _client(bare, bare.admin_token)
    for step in reviews:
        who = admin if "admin" in step["note"] else viewer
        answer = who.api_client.sanitize_for_serialization(
            who.create_self_subject_access_review(step["request"]["body"]))
        expected = step["response"]
        assert step["status"] == 201
        assert answer["kind"] == expected["kind"] and answer["apiVersion"] == expected["apiVersion"]
        assert answer["spec"] == expected["spec"], step["note"]
        assert answer["status"] == expected["status"], step["note"]
