"""Every /v1/ endpoint under each credential: the operator's bearer, a site-bound token, none or a wrong one.

Two tenants keep the same demo site: demo.test (crawled twice, then once more with a changed page
and a duplicate, so it has a failed delivery and an open conflict) and other.test (crawled once).
A token bound to other.test must find nothing of demo.test: each of its ids answers 404, exactly
like an id that does not exist, and every list shows only other.test's rows.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from gleaner import tenancy
from gleaner.backoffice import api
from gleaner.backoffice.wsgi import BackofficeApp
from gleaner.changes import subscriptions
from gleaner.cli import main
from gleaner.cli.operating import drain_local
from gleaner.operator.routing import create_composite
from gleaner.origins.uploads import UploadRequest, accept, run_job
from gleaner.runtime.runner import crawl, new_request
from gleaner.store.access.tokens import TokenStore
from tests.backoffice.conftest import CHANGED, SITE, Answer, Kept, call

OTHER = "other.test"
OPERATOR = "operator-secret"

# Every route of api.ROUTES, with the ids of the site it names filled in from Ids.
ENDPOINTS: list[tuple[str, str, Any]] = [
    ("GET", "/v1/sites", None),
    ("POST", "/v1/sites", {"url": "{url}/", "site_domain": "{site}"}),
    ("POST", "/v1/sites/{site}/runs", {}),
    ("GET", "/v1/sites/{site}/tree", None),
    ("GET", "/v1/sites/{site}/documents", None),
    ("GET", "/v1/sites/{site}/export", None),
    ("GET", "/v1/runs", None),
    ("GET", "/v1/runs/{run}", None),
    ("GET", "/v1/runs/{run}/urls", None),
    ("POST", "/v1/runs/{run}/cancel", {}),
    ("POST", "/v1/runs/{run}/resume", {}),
    ("POST", "/v1/runs/{run}/replay", {}),
    ("GET", "/v1/documents/{doc}", None),
    ("POST", "/v1/documents/{doc}/rescrape", {}),
    ("GET", "/v1/documents/{doc}/versions/1", None),
    ("GET", "/v1/documents/{doc}/diff", None),
    ("GET", "/v1/changes", None),
    ("GET", "/v1/notify/subscriptions", None),
    ("POST", "/v1/notify/subscriptions/{subscription}", {"status": "active"}),
    ("GET", "/v1/notify/deliveries", None),
    ("POST", "/v1/notify/deliveries/{delivery}/retry", {}),
    ("GET", "/v1/sites/{site}/rules", None),
    ("POST", "/v1/sites/{site}/rules", {"glob": "/about", "action": "skip"}),
    ("DELETE", "/v1/sites/{site}/rules/{rule}", None),
    ("GET", "/v1/sites/{site}/review", None),
    ("POST", "/v1/sites/{site}/review", {"url": "{url}/about", "decision": "exclude"}),
    ("GET", "/v1/sites/{site}/conflicts", None),
    ("POST", "/v1/sites/{site}/conflicts/{conflict}", {"status": "resolved"}),
    ("GET", "/v1/sites/{site}/composites", None),
    ("GET", "/v1/composites/{composite}", None),
    ("POST", "/v1/composites/{composite}", {"status": "in_validation"}),
    # A client's edit of its composite: a new version, ``edited`` (tests/backoffice/test_validation.py).
    ("POST", "/v1/composites/{composite}/edit", {"markdown": "# Install\n\nEdited by the tenancy test.\n"}),
    ("GET", "/v1/quality", None),
    ("GET", "/v1/openapi.json", None),
    # Search's tenancy (a site token ranks its own site's chunks only) is tests/integration/test_retrieval.py's;
    # here it answers like every route: 401 without a credential, 400 without a query.
    ("GET", "/v1/search", None),
    # Uploads and feedback write into the caller's site only (tests/integration/test_uploads.py, test_feedback.py).
    ("POST", "/v1/ingest", {"site": "{site}", "text": "# Note\n\nKept by the tenancy test.\n", "format": "markdown",
                            "path": "/note.md"}),
    ("GET", "/v1/ingest/{job}", None),
    ("POST", "/v1/feedback", {"site": "{site}", "text": "The install page is out of date."}),
    # Comments and flags on a document, kept as the caller's (tests/backoffice/test_validation.py).
    ("GET", "/v1/documents/{doc}/remarks", None),
    ("POST", "/v1/documents/{doc}/remarks", {"kind": "flag", "text": "The install steps are wrong."}),
]
# Routes that name no object (lists, and the API's own description): a site token gets 200, not 404.
LISTS = {"/v1/sites", "/v1/runs", "/v1/changes", "/v1/notify/subscriptions", "/v1/notify/deliveries", "/v1/quality",
         "/v1/openapi.json", "/v1/search"}
OPERATOR_ONLY = {"/v1/quality"}


@dataclass
class Ids:
    site: str
    run: str
    doc: str
    delivery: str
    rule: str
    conflict: str
    subscription: str
    token: str
    url: str
    composite: str
    job: str

    def fill(self, text: str) -> str:
        return text.format(**{k: v for k, v in vars(self).items()})

    def request(self, method: str, template: str, body: Any) -> tuple[str, str, Any]:
        filled = {k: self.fill(v) for k, v in body.items()} if isinstance(body, dict) else body
        return method, self.fill(template), filled


@dataclass
class Tenants:
    kept: Kept
    app: BackofficeApp  # behind the operator bearer, as in the cloud
    demo: Ids
    other: Ids

    def ask(self, method: str, path: str, token: str | None, body: Any = None, **query: Any) -> Answer:
        return call(self.app, method, path, token=token, json_body=body, query=query)


def _tenant(kept: Kept, app: BackofficeApp, site: str, run: str, subscription: str) -> Ids:
    rule = call(app, "POST", f"/v1/sites/{site}/rules", token=OPERATOR,
                json_body={"glob": "/legal/*", "action": "skip"}).json()["rule"]["id"]
    conflicts = call(app, "GET", f"/v1/sites/{site}/conflicts", token=OPERATOR).json()["conflicts"]
    failed = kept.deps.metadata.delivery_log(subscription, 1)
    token = TokenStore(kept.deps.engine).add_site(site)["token"]
    with tenancy.scope(site):  # the same URL is a document of both tenants
        doc = kept.deps.metadata.document_by_url(kept.site.url + CHANGED)
    assert doc is not None
    composite = create_composite(kept.deps, site, "Install", [kept.site.url + CHANGED])
    drain_local(kept.deps)
    accepted = accept(kept.deps, UploadRequest(site, b"# Kept\n\nAn upload.\n", "tester", file_name="kept.md"))
    run_job(kept.deps, accepted.job_id, site, accepted.extracted)
    return Ids(site=site, run=run, doc=str(doc["id"]), delivery=failed[0]["id"] if failed else str(uuid.uuid4()),
               rule=rule, conflict=conflicts[0]["id"] if conflicts else str(uuid.uuid4()), subscription=subscription,
               token=token, url=kept.site.url, composite=composite.id,
               job=accepted.job_id)


@pytest.fixture
def tenants(kept: Kept) -> Iterator[Tenants]:
    allow = kept.deps.settings.allow_networks
    demo_sub = subscriptions.add(kept.deps.metadata, "http://127.0.0.1:9/demo", site=SITE, types=(), allow=allow)
    other_sub = subscriptions.add(kept.deps.metadata, "http://127.0.0.1:9/other", site=OTHER, types=(), allow=allow)
    kept.recrawl("/about", copies={"/pricing": "/about"})  # a failed delivery and an open conflict on demo.test
    other_run = crawl(kept.deps, new_request(kept.site.url + "/", site_domain=OTHER))
    app = BackofficeApp(kept.deps, bearer=OPERATOR)
    yield Tenants(kept, app, _tenant(kept, app, SITE, kept.first["run_id"], demo_sub.id),
                  _tenant(kept, app, OTHER, other_run["run_id"], other_sub.id))


def test_the_endpoint_table_covers_every_route_of_the_api():
    covered = {(method, template) for method, template, _ in ENDPOINTS}
    for pattern, methods in api.ROUTES:
        for method in methods:
            assert any(m == method and pattern.fullmatch(re.sub(r"\{[a-z]+\}", "x", t)) for m, t in covered), (
                f"{method} {pattern.pattern} has no row in ENDPOINTS: add it, with its tenancy expectations")


def test_every_endpoint_answers_401_without_a_credential_or_with_a_wrong_or_revoked_one(tenants: Tenants):
    revoked = TokenStore(tenants.kept.deps.engine).add_site(SITE)
    assert TokenStore(tenants.kept.deps.engine).revoke(revoked["id"])
    workspace = TokenStore(tenants.kept.deps.engine).add("ws-1")["token"]  # the feed webhook's kind of token
    for method, path, body in (tenants.demo.request(*row) for row in ENDPOINTS):
        for token in (None, "wrong", "glt_" + "A" * 43, revoked["token"], workspace):
            answer = tenants.ask(method, path, token, body)
            assert answer.status == 401, (method, path, token, answer.body)
            assert answer.headers["WWW-Authenticate"] == 'Bearer realm="gleaner"'


def test_a_site_token_gets_404_for_every_id_of_another_site_and_changes_nothing(tenants: Tenants):
    demo, intruder = tenants.demo, tenants.other.token
    before = tenants.ask("GET", f"/v1/sites/{SITE}/conflicts", OPERATOR).json()
    for method, path, body in (demo.request(*row) for row in ENDPOINTS if row[1] not in LISTS):
        answer = tenants.ask(method, path, intruder, body)
        assert answer.status == 404, (method, path, answer.body)
    assert tenants.ask("GET", f"/v1/sites/{SITE}/conflicts", OPERATOR).json() == before
    assert tenants.ask("GET", f"/v1/documents/{demo.doc}/remarks", OPERATOR).json()["remarks"] == []
    assert len(tenants.ask("GET", f"/v1/composites/{demo.composite}", OPERATOR).json()["versions"]) == 1
    assert [r["id"] for r in tenants.ask("GET", f"/v1/sites/{SITE}/rules", OPERATOR).json()["rules"]] == [demo.rule]
    assert tenants.ask("GET", f"/v1/runs/{demo.run}", OPERATOR).json()["status"] == "finished"
    # The same answer as for an id that does not exist: nothing tells the intruder the object is there.
    missing = str(uuid.uuid4())
    for path in ("/v1/runs/{}", "/v1/documents/{}", f"/v1/sites/{SITE}/conflicts/{{}}"):
        seen = tenants.ask("POST" if "conflicts" in path else "GET", path.format(demo.run if "runs" in path else (
            demo.doc if "documents" in path else demo.conflict)), intruder, {"status": "resolved"})
        unknown = tenants.ask("POST" if "conflicts" in path else "GET", path.format(missing), intruder,
                              {"status": "resolved"})
        assert (seen.status, seen.json()["error"].replace(demo.run, "?").replace(demo.doc, "?").replace(
            demo.conflict, "?")) == (unknown.status, unknown.json()["error"].replace(missing, "?"))


def test_a_site_token_reads_and_steers_its_own_site(tenants: Tenants):
    demo = tenants.demo
    expected = {"/v1/runs/{run}/cancel": 409, "/v1/runs/{run}/resume": 409, "/v1/quality": 403,  # a finished run
                # Adding sites is the operator's; the site is not registered, so there is nothing to crawl.
                ("POST", "/v1/sites"): 403, "/v1/sites/{site}/runs": 404, "/v1/search": 400,
                "/v1/documents/{doc}/rescrape": 202, "/v1/runs/{run}/replay": 202,  # runs of its own pages
                "/v1/ingest": 202, "/v1/feedback": 201, ("POST", "/v1/documents/{doc}/remarks"): 201,
                "/v1/composites/{composite}/edit": 201}
    for method, template, body in ENDPOINTS:
        method, path, filled = demo.request(method, template, body)
        answer = tenants.ask(method, path, demo.token, filled)
        assert answer.status == expected.get((method, template), expected.get(template, 200)), (
            method, path, answer.body)
    assert tenants.ask("GET", f"/v1/sites/{SITE}/conflicts", OPERATOR).json()["conflicts"][0]["status"] == "resolved"
    assert tenants.ask("GET", f"/v1/sites/{SITE}/rules", OPERATOR).json()["rules"][-1]["glob"] == "/about"
    remarks = tenants.ask("GET", f"/v1/documents/{demo.doc}/remarks", OPERATOR).json()["remarks"]
    assert [(r["kind"], r["by"]) for r in remarks] == [("flag", f"site token for {SITE}")]
    edited = tenants.ask("GET", f"/v1/composites/{demo.composite}", OPERATOR).json()
    assert edited["composite"]["status"] == "edited" and edited["versions"][-1]["by"] == f"site token for {SITE}"


def test_lists_under_a_site_token_show_only_that_sites_rows(tenants: Tenants):
    other = tenants.other
    assert [s["site_domain"] for s in tenants.ask("GET", "/v1/sites", other.token).json()["sites"]] == [OTHER]
    runs = tenants.ask("GET", "/v1/runs", other.token).json()
    assert [r["run_id"] for r in runs["runs"]] == [other.run] and runs["total"] == 1
    assert tenants.ask("GET", "/v1/runs", other.token, site=SITE).json()["runs"] == []
    events = tenants.ask("GET", "/v1/changes", other.token, limit=1000).json()["events"]
    assert events and {e["site_domain"] for e in events} == {OTHER}
    assert tenants.ask("GET", "/v1/changes", other.token, site=SITE).json()["events"] == []
    subs = tenants.ask("GET", "/v1/notify/subscriptions", other.token).json()["subscriptions"]
    assert [s["id"] for s in subs] == [other.subscription]
    deliveries = tenants.ask("GET", "/v1/notify/deliveries", other.token, limit=1000).json()["deliveries"]
    assert deliveries and {d["subscription_id"] for d in deliveries} == {other.subscription}
    assert tenants.ask("GET", "/v1/notify/deliveries", other.token, subscription=tenants.demo.subscription
                       ).status == 404
    # The operator sees both.
    every = tenants.ask("GET", "/v1/notify/deliveries", OPERATOR, limit=1000).json()["deliveries"]
    assert {d["subscription_id"] for d in every} == {other.subscription, tenants.demo.subscription}
    assert {s["site_domain"] for s in tenants.ask("GET", "/v1/sites", OPERATOR).json()["sites"]} == {SITE, OTHER}


def test_the_quality_log_is_the_operators_alone(tenants: Tenants):
    answer = tenants.ask("GET", "/v1/quality", tenants.other.token)
    assert answer.status == 403 and "operator" in answer.json()["error"]
    assert tenants.ask("GET", "/v1/quality", OPERATOR).json() == {"entries": [], "total": 0, "limit": 100,
                                                                   "offset": 0}


BAD_INPUTS: list[tuple[str, str, Any, dict[str, str]]] = [
    ("GET", "/v1/sites/{site}/tree", None, {"prefix": "docs"}),
    ("GET", "/v1/sites/{site}/documents", None, {"status": "gone"}),
    ("GET", "/v1/sites/{site}/export", None, {"format": "parquet"}),
    ("GET", "/v1/sites/{site}/export", None, {"spans": "yes"}),
    ("GET", "/v1/runs", None, {"limit": "0"}),
    ("GET", "/v1/runs/{run}/urls", None, {"status": "Not A Status!"}),
    ("GET", "/v1/documents/{doc}/versions/x", None, {}),
    ("GET", "/v1/documents/{doc}/diff", None, {"from": "0"}),
    ("GET", "/v1/changes", None, {"since": "yesterday"}),
    ("GET", "/v1/notify/deliveries", None, {"limit": "99999"}),
    ("POST", "/v1/sites/{site}/rules", {"glob": "/x", "action": "hide"}, {}),
    ("POST", "/v1/sites/{site}/review", {"url": "{url}/about", "decision": "maybe"}, {}),
    ("GET", "/v1/sites/{site}/conflicts", None, {"status": "closed"}),
    ("POST", "/v1/sites/{site}/conflicts/{conflict}", {"status": "fixed"}, {}),
    ("GET", "/v1/quality", None, {"kind": "spam"}),
    ("POST", "/v1/composites/{composite}", {"status": "shipped"}, {}),
    ("POST", "/v1/composites/{composite}/edit", {"markdown": " "}, {}),
    ("POST", "/v1/documents/{doc}/remarks", {"kind": "praise", "text": "Nice."}, {}),
    ("POST", "/v1/notify/subscriptions/{subscription}", {"status": "paused"}, {}),
    ("GET", "/v1/quality", None, {"since": "last week"}),
]


def test_bad_input_is_a_400_for_a_site_token_and_for_the_operator(tenants: Tenants):
    for method, template, body, query in BAD_INPUTS:
        method, path, filled = tenants.demo.request(method, template, body)
        tokens = [OPERATOR] if template in OPERATOR_ONLY else [OPERATOR, tenants.demo.token]
        for token in tokens:
            answer = call(tenants.app, method, path, token=token, json_body=filled, query=query)
            assert answer.status == 400 and answer.json()["error"], (method, path, query, answer.body)


def test_a_site_token_logs_into_the_pages_and_sees_only_its_site_until_revoked(tenants: Tenants):
    app, other = tenants.app, tenants.other
    logged_in = call(app, "POST", "/ui/login", form=f"token={other.token}".encode())
    assert logged_in.status == 303
    session = logged_in.headers["Set-Cookie"].split(";", 1)[0]
    assert other.token not in session
    home = call(app, "GET", "/ui/", cookie=session)
    assert home.status == 200 and OTHER.encode() in home.body and SITE.encode() not in home.body
    assert b"/ui/quality" not in home.body  # the operator's page is not offered
    assert b"/ui/quality" in call(app, "GET", "/ui/", token=OPERATOR).body
    assert call(app, "GET", f"/ui/sites/{OTHER}", cookie=session).status == 200
    for page in (f"/ui/sites/{SITE}", f"/ui/runs/{tenants.demo.run}", f"/ui/documents/{tenants.demo.doc}",
                 f"/ui/sites/{SITE}/conflicts"):
        assert call(app, "GET", page, cookie=session).status == 404, page
    assert call(app, "GET", "/ui/quality", cookie=session).status == 403
    forged = session.replace(session.split(".")[-1], "0" * 64)
    assert call(app, "GET", "/ui/", cookie=forged).status == 303
    token_id = next(t["id"] for t in TokenStore(tenants.kept.deps.engine).list() if t["site_domain"] == OTHER)
    TokenStore(tenants.kept.deps.engine).revoke(token_id)
    assert call(app, "GET", "/ui/", cookie=session).headers["Location"] == "/ui/login"


def test_on_loopback_no_credential_is_the_operator_and_a_site_token_still_binds(tenants: Tenants):
    url = tenants.kept.url  # gleaner serve on 127.0.0.1: no operator bearer
    every = httpx.get(url + "/v1/sites", timeout=10).json()["sites"]
    assert {s["site_domain"] for s in every} == {SITE, OTHER}
    bound = httpx.get(url + "/v1/sites", headers={"Authorization": f"Bearer {tenants.other.token}"}, timeout=10)
    assert [s["site_domain"] for s in bound.json()["sites"]] == [OTHER]
    assert httpx.get(url + f"/v1/runs/{tenants.demo.run}", timeout=10,
                     headers={"Authorization": f"Bearer {tenants.other.token}"}).status_code == 404
    assert httpx.get(url + "/v1/sites", headers={"Authorization": "Bearer wrong"}, timeout=10).status_code == 401
    # A site token is no feed-webhook credential.
    assert httpx.post(url + "/", json={}, timeout=10,
                      headers={"Authorization": f"Bearer {tenants.other.token}"}).status_code == 401


def test_tokens_add_binds_a_token_to_one_site_and_refuses_ambiguous_or_bad_requests(kept: Kept, database_url: str,
                                                                                      tmp_path: Any):
    env = {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "gleaner")}
    added = CliRunner().invoke(main, ["tokens", "add", "--site-domain", SITE, "--json"], env=env)
    assert added.exit_code == 0, added.output
    created = json.loads(added.stdout)
    assert created["site_domain"] == SITE and created["token"].startswith("glt_") and "workspace_id" not in created
    assert call(BackofficeApp(kept.deps, bearer=OPERATOR), "GET", "/v1/sites", token=created["token"]
                ).json()["sites"][0]["site_domain"] == SITE
    listed = json.loads(CliRunner().invoke(main, ["tokens", "list", "--json"], env=env).stdout)
    assert [(t["site_domain"], t["workspace_id"]) for t in listed] == [(SITE, None)]
    both = CliRunner().invoke(main, ["tokens", "add", "--site-domain", SITE, "--workspace", "w"], env=env)
    neither = CliRunner().invoke(main, ["tokens", "add"], env=env)
    bad = CliRunner().invoke(main, ["tokens", "add", "--site-domain", "Not A Site"], env=env)
    assert (both.exit_code, neither.exit_code, bad.exit_code) == (2, 2, 2)
    assert "exactly one" in both.output and "lowercase" in bad.output
    # `gleaner --tenant A` cannot mint a token for B.
    minted = CliRunner().invoke(main, ["--tenant", SITE, "tokens", "add", "--site-domain", OTHER], env=env)
    assert minted.exit_code != 0
