"""The back office as its own cloud function (functions/backoffice), loaded as Cloud Functions loads it."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest
from functions_framework import create_app

from gleaner import app as gleaner_app
from gleaner import tenancy
from gleaner.store.access.tokens import TokenStore

ROOT = Path(__file__).resolve().parents[2]
FN_SECRET = "fn-secret-0123456789abcdef0123456789abcdef"


def function_client(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, database_url: str, secret: str | None,
                    function: str = "backoffice"):
    monkeypatch.setenv("GLEANER_DATABASE_URL", database_url)
    monkeypatch.setenv("GLEANER_HOME", str(tmp_path / "gleaner"))
    if secret:
        monkeypatch.setenv("GLEANER_WEBHOOK_SECRET", secret)
    else:
        monkeypatch.delenv("GLEANER_WEBHOOK_SECRET", raising=False)
    gleaner_app.reset_process_deps()
    return create_app(target="on_http", source=str(ROOT / "functions" / function / "main.py")).test_client()


def identity_token(email: str) -> str:
    """What Cloud Run leaves of a Google identity token it verified (the claims; the code never trusts them)."""
    claims = {"iss": "https://accounts.google.com", "email": email, "exp": int(time.time()) + 600}
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"e30.{body}.sig"


@pytest.fixture
def reset_deps() -> object:
    yield None
    gleaner_app.reset_process_deps()


def test_the_backoffice_function_serves_the_api_and_pages_only_with_the_operator_bearer(
        monkeypatch, tmp_path, database_url, reset_deps):
    client = function_client(monkeypatch, tmp_path, database_url, FN_SECRET)
    assert client.get("/v1/sites").status_code == 401
    assert client.get("/v1/runs", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.get("/ui/").headers["Location"].endswith("/ui/login")
    answer = client.get("/v1/sites", headers={"Authorization": f"Bearer {FN_SECRET}"})
    assert answer.status_code == 200 and answer.get_json() == {"sites": []}
    page = client.get("/ui/", headers={"Authorization": f"Bearer {FN_SECRET}"})
    assert page.status_code == 200 and b"No sites yet" in page.data
    assert page.headers["Content-Type"].startswith("text/html")
    assert client.get("/", headers={"Authorization": f"Bearer {FN_SECRET}"}).status_code == 404


def test_an_identity_token_iam_admitted_is_no_credential_but_the_session_cookie_still_is(
        monkeypatch, tmp_path, database_url, reset_deps):
    client = function_client(monkeypatch, tmp_path, database_url, FN_SECRET)
    with tenancy.all_tenants():
        site_token = TokenStore(gleaner_app.process_deps().engine).add_site("shop.test")["token"]
    iam = {"Authorization": f"Bearer {identity_token('someone@example.com')}"}
    # Admitted by Cloud Run, yet not the operator: IAM alone opens nothing here.
    assert client.get("/v1/sites", headers=iam).status_code == 401
    # Through `gcloud run services proxy` the identity token rides along; the login cookie decides.
    login = client.post("/ui/login", data={"token": site_token}, headers=iam)
    assert login.status_code == 303
    answer = client.get("/v1/sites", headers=iam)
    assert answer.status_code == 200 and answer.get_json() == {"sites": []}  # shop.test has nothing yet
    assert client.get("/v1/quality", headers=iam).status_code == 403  # a site token, not the operator


def test_without_a_configured_secret_the_function_refuses_the_back_office(monkeypatch, tmp_path, database_url,
                                                                          reset_deps):
    client = function_client(monkeypatch, tmp_path, database_url, None)
    assert client.get("/v1/sites", headers={"Authorization": "Bearer anything"}).status_code == 500


def test_the_feed_webhook_function_no_longer_serves_the_back_office(monkeypatch, tmp_path, database_url,
                                                                    reset_deps):
    client = function_client(monkeypatch, tmp_path, database_url, FN_SECRET, function="ingest")
    for path in ("/v1/sites", "/ui/"):
        answer = client.get(path, headers={"Authorization": f"Bearer {FN_SECRET}"})
        assert answer.status_code == 404 and b"No sites yet" not in answer.data


def test_the_function_streams_the_export_as_it_is_made(monkeypatch, tmp_path, database_url, make_deps, reset_deps):
    from gleaner.demosite.demo import demo_pages
    from gleaner.demosite.testsite import TestSite
    from gleaner.exporting.exportformats import jsonl_lines
    from gleaner.runtime.runner import crawl, new_request

    deps = make_deps()  # the same database and blob directory as the function's
    pages: dict = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(demo_pages(site.url))
        crawl(deps, new_request(site.url + "/", site_domain="shop.test"))
    client = function_client(monkeypatch, tmp_path, database_url, FN_SECRET)
    answer = client.get("/v1/sites/shop.test/export", query_string={"format": "jsonl", "spans": "1"},
                        headers={"Authorization": f"Bearer {FN_SECRET}"})
    assert answer.status_code == 200 and answer.headers["Content-Type"] == "application/x-ndjson"
    assert answer.is_streamed and "Content-Length" not in answer.headers
    with tenancy.all_tenants():
        assert answer.data == b"".join(jsonl_lines(deps, "shop.test", spans=True)) and answer.data.count(b"\n") > 5
    missing = client.get("/v1/sites/nosuch.test/export", headers={"Authorization": f"Bearer {FN_SECRET}"})
    assert missing.status_code == 404 and missing.get_json() == {"error": "no site nosuch.test"}
