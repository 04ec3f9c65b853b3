"""The operator's ways in: a run's status over GET, and IAM identity tokens on map-http.

Cloud Run checks the identity token before the request reaches the code (the function has no
public invoker); the code then admits it when GLEANER_HTTP_AUTH=iam, and only then.
"""

from __future__ import annotations

import base64
import json
import time

import pytest

from gleaner import app as gleaner_app
from gleaner.messages import run_id_for
from tests.e2e.test_functions_http import SECRET, client, function_env, pubsub_env  # noqa: F401  (fixtures)


def identity_token(email: str = "ops@example.iam.gserviceaccount.com", issuer: str = "https://accounts.google.com",
                   expires_in: float = 3600) -> str:
    """A Google identity token as Cloud Run hands it on (signature removed)."""
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    claims = {"iss": issuer, "email": email, "aud": "https://map-http.example", "exp": int(time.time() + expires_in)}
    return f"{part({'alg': 'RS256'})}.{part(claims)}.SIGNATURE_REMOVED_BY_GOOGLE"


def post(headers: dict[str, str]) -> int:
    response = client("map", "on_http").post("/", data=json.dumps({"url": "https://example.com/"}).encode(),
                                              headers={"Content-Type": "application/json", **headers})
    return int(response.status_code)


@pytest.fixture
def iam_env(pubsub_env, monkeypatch):  # noqa: F811  (the imported fixture)
    monkeypatch.setenv("GLEANER_HTTP_AUTH", "iam")
    gleaner_app.reset_process_deps()
    return pubsub_env


def test_an_identity_token_is_admitted_when_iam_guards_the_function(iam_env):
    assert post({"Authorization": f"Bearer {identity_token()}"}) == 202
    # The form that leaves Authorization to the application (e.g. for the shared bearer).
    assert post({"X-Serverless-Authorization": f"Bearer {identity_token()}"}) == 202
    assert post({"Authorization": f"Bearer {SECRET}"}) == 202


@pytest.mark.parametrize("token", [identity_token(issuer="https://evil.example"), identity_token(expires_in=-600),
                                   "not.a-jwt", "a.b.c"])
def test_tokens_that_are_not_current_google_identity_tokens_are_refused(iam_env, token):
    assert post({"Authorization": f"Bearer {token}"}) == 401


def test_an_identity_token_is_refused_where_no_iam_stands_in_front(function_env):  # noqa: F811
    assert post({"Authorization": f"Bearer {identity_token()}"}) == 401


def test_get_with_a_run_id_answers_the_runs_status_and_counters(function_env, make_deps):  # noqa: F811
    deps = make_deps()
    run_id = run_id_for("status-probe")
    host = deps.metadata.upsert_source_host("example.com", "example.com", True)
    deps.metadata.create_run(run_id, "example.com", host, "https://example.com/", {}, "website_mapping", "api")
    auth = {"Authorization": f"Bearer {SECRET}"}
    map_http = client("map", "on_http")

    answer = map_http.get(f"/?run_id={run_id}", headers=auth)
    assert answer.status_code == 200
    body = answer.get_json()
    assert (body["run_id"], body["status"], body["site_domain"]) == (run_id, "mapping", "example.com")
    assert {"discovered", "included", "fetched", "failed", "snapshots"} <= set(body)

    assert map_http.get(f"/?run_id={run_id_for('never')}", headers=auth).status_code == 404
    assert map_http.get("/?run_id=nope", headers=auth).status_code == 400
    assert map_http.get(f"/?run_id={run_id}").status_code == 401
