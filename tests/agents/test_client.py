"""`gleaner.client.Gleaner` against a running `gleaner serve` (the agents' kept demo site, real PostgreSQL).

Every route of the server's OpenAPI document is a client method or listed in NOT_COVERED with a
reason; each method is called here against the real server, and its answer compared with what the
server's own stores hold.
"""

from __future__ import annotations

import socket
import time
from typing import Any, get_type_hints

import pytest

from gleaner import tenancy
from gleaner.backoffice.openapi import document
from gleaner.cli.operating import drain_local
from gleaner.client import (
    NOT_COVERED,
    ApiError,
    ChangeEvent,
    ExportCut,
    ExportRecord,
    Gleaner,
    RunSummary,
    SearchHit,
    ServerUnreachable,
    TextSlice,
)
from gleaner.operator.routing import create_composite
from gleaner.runtime.runner import crawl, new_request
from gleaner.store.access.tokens import TokenStore

from .conftest import OPERATOR_SECRET, SITE, Served

MINE = "client.test"  # the tenant these tests register, crawl and steer (the shared demo.test stays as it is)


def _keys(typed: type) -> set[str]:
    return set(get_type_hints(typed))


def _token(served: Served, site: str) -> str:
    with tenancy.all_tenants():
        return str(TokenStore(served.deps.engine).add_site(site)["token"])


def test_every_route_of_the_openapi_document_is_a_method_or_listed_as_not_covered():
    described = {(method.upper(), path) for path, ops in document()["paths"].items() for method in ops}
    bound = {(route.method, route.template) for route in Gleaner.ROUTES.values()}
    assert not bound - described, "methods bound to routes the server does not have"
    missing = described - bound - set(NOT_COVERED)
    assert not missing, f"routes with no client method: add one, or list it in NOT_COVERED with a reason: {missing}"
    assert all(reason.strip() for reason in NOT_COVERED.values())
    assert not set(NOT_COVERED) & bound


def test_the_client_reads_the_kept_copy_as_the_server_holds_it(served: Served):
    with Gleaner(served.url, OPERATOR_SECRET) as gleaner:
        assert SITE in {s["site_domain"] for s in gleaner.sites()}
        tree = gleaner.tree(SITE, "/docs/")
        assert tree["prefix"] == "/docs/" and tree["documents"]
        listed = list(gleaner.each_document(SITE, status="active"))
        total = gleaner.documents(SITE, status="active", limit=1)["total"]
        assert len(listed) == total > 5
        run: RunSummary = gleaner.run(served.run["run_id"])
        assert run["status"] == "finished" and set(run) == _keys(RunSummary)
        assert served.run["run_id"] in {r["run_id"] for r in gleaner.each_run(site=SITE)}
        urls = gleaner.run_urls(served.run["run_id"], status="fetched", limit=2)
        assert len(urls["urls"]) == 2 and urls["total"] >= 5
        doc_id = served.document_id("/docs/install")
        found = gleaner.document(doc_id)
        text = served.current_text("/docs/install")
        assert found["current_text"]["text_hash"] == text.text_hash
        assert gleaner.version(doc_id, 1)["body"].startswith("# Install")
        assert gleaner.diff(doc_id)["to"] == 1
        whole: TextSlice = gleaner.text(text.text_hash)
        assert whole["text"].encode("utf-8") == text.body and set(whole) == _keys(TextSlice)
        assert gleaner.text(text.text_hash, 0, 9)["text"].encode("utf-8") == text.body[:9]
        events: list[ChangeEvent] = gleaner.changes(site=SITE, limit=1000)
        assert {e["type"] for e in events} >= {"document.new"}
        assert set(events[0]) <= _keys(ChangeEvent)
        hits: list[SearchHit] = gleaner.search("install", site=SITE, limit=3)
        assert hits and set(hits[0]) == _keys(SearchHit) - {"composite_id"}  # a page's hit (a composite's adds it)
        assert gleaner.text(hits[0]["text_hash"], hits[0]["start"], hits[0]["end"])["text"]
        assert gleaner.openapi() == document()
        assert gleaner.quality() == {"entries": [], "total": 0, "limit": 100, "offset": 0}
        assert gleaner.subscriptions() == [] and gleaner.deliveries() == []
        # The review queue lists pages waiting for a decision and the pages the decider excluded.
        assert {item["decision"] for item in gleaner.review(SITE)} <= {"needs_review", "exclude"}
        assert gleaner.conflicts(SITE) == []


def test_the_export_iterator_yields_the_servers_records_as_they_stream(served: Served):
    with Gleaner(served.url, OPERATOR_SECRET) as gleaner:
        records: list[ExportRecord] = list(gleaner.export(SITE, spans=True))
        plain = list(gleaner.export(SITE))
    assert [r["url"] for r in records] == sorted(r["url"] for r in records) and len(records) > 5
    assert all(set(r) == _keys(ExportRecord) for r in records) and all("spans" not in r for r in plain)
    assert [{k: v for k, v in r.items() if k != "spans"} for r in records] == plain
    install = next(r for r in records if r["url"].endswith("/docs/install"))
    assert install["markdown"] == served.deps.blobs.get(
        served.deps.metadata.current_versions(SITE)[[r["url"] for r in plain].index(install["url"])]["content_ref"]
    ).decode("utf-8")


def test_the_client_registers_crawls_and_steers_a_site(served: Served):
    with Gleaner(served.url, OPERATOR_SECRET) as gleaner:
        site = gleaner.add_site(served.site.url + "/", site_domain=MINE, limit=4)
        assert site["site_domain"] == MINE
        started = gleaner.crawl(MINE)
        deadline = time.monotonic() + 120
        while (run := gleaner.run(started["run_id"]))["finished_at"] is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert run["status"] in ("finished", "partial") and run["fetched"] >= 1
        with pytest.raises(ApiError) as ended:
            gleaner.cancel_run(started["run_id"])
        assert ended.value.status == 409 and "already ended" in ended.value.message
        try:  # a run its limit left partial may be finished; a finished one may not
            assert gleaner.resume_run(started["run_id"])["resumed"] is True and run["status"] == "partial"
        except ApiError as refused_resume:
            assert refused_resume.status == 409 and run["status"] == "finished"
        added = gleaner.add_rule(MINE, "/legal/*", "skip", reason="not ours")
        assert [r["id"] for r in gleaner.rules(MINE)] == [added["rule"]["id"]]
        assert gleaner.remove_rule(MINE, added["rule"]["id"])["rule"]["id"] == added["rule"]["id"]
        assert gleaner.rules(MINE) == []
        replayed = gleaner.replay_run(started["run_id"])  # from what the run stored: nothing fetched
        assert replayed["replay_of"] == started["run_id"] and replayed["run_id"] != started["run_id"]
        assert gleaner.run(replayed["run_id"])["replay"]["replay_of"] == started["run_id"]
        assert gleaner.composites(MINE) == []  # none folded on this site
        unknown = "00000000-0000-0000-0000-000000000000"
        for call in (lambda: gleaner.retry_delivery(unknown),
                     lambda: gleaner.settle_conflict(MINE, unknown, "resolved"),
                     lambda: gleaner.rescrape(unknown), lambda: gleaner.composite(unknown),
                     lambda: gleaner.move_composite(unknown, "in_validation"),
                     lambda: gleaner.set_subscription_status(unknown, "disabled"),
                     lambda: gleaner.decide(MINE, served.site.url + "/nowhere", "include")):
            with pytest.raises(ApiError) as refused:
                call()
            assert refused.value.status in (400, 404) and refused.value.message


def test_errors_carry_the_servers_status_and_message(served: Served):
    other = _token(served, "client-elsewhere.test")
    with Gleaner(served.url, other) as intruder:
        with pytest.raises(ApiError) as hidden:
            intruder.document(served.document_id("/docs/install"))
        assert hidden.value.status == 404 and hidden.value.message.startswith("no document")
        with pytest.raises(ApiError) as not_mine:
            list(intruder.export(SITE))
        assert not_mine.value.status == 404 and not_mine.value.body == {"error": f"no site {SITE}"}
        assert intruder.sites() == []
        with pytest.raises(ApiError) as operator_only:
            intruder.quality()
        assert operator_only.value.status == 403
    with Gleaner(served.url, "glt_wrong") as wrong, pytest.raises(ApiError) as unauthorized:
        wrong.sites()
    assert unauthorized.value.status == 401 and "Bearer" in unauthorized.value.message
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with Gleaner(f"http://127.0.0.1:{port}", timeout=2) as nowhere, pytest.raises(ServerUnreachable):
        nowhere.sites()


def test_the_base_url_and_token_come_from_the_environment_when_not_given(served: Served):
    mine = _token(served, SITE)
    with Gleaner(env={"GLEANER_URL": served.url + "/", "GLEANER_TOKEN": mine}) as gleaner:
        assert gleaner.base_url == served.url
        assert [s["site_domain"] for s in gleaner.sites()] == [SITE]  # the site token's view, not the operator's
    with Gleaner(env={}) as default:
        assert default.base_url == "http://127.0.0.1:8080"
    assert "token" not in repr(Gleaner(served.url, mine)) and mine not in repr(Gleaner(served.url, mine))


def test_an_export_cut_by_the_server_raises_export_cut_not_a_short_list(served: Served):
    cut = "client-cut.test"
    crawl(served.deps, new_request(served.site.url + "/", site_domain=cut))
    with tenancy.all_tenants():
        items = served.deps.metadata.current_versions(cut)
    assert served.deps.blobs.delete(items[-1]["content_ref"])
    seen: list[Any] = []
    with Gleaner(served.url, OPERATOR_SECRET) as gleaner, pytest.raises(ExportCut):
        for record in gleaner.export(cut):
            seen.append(record)
    assert [r["url"] for r in seen] == [i["url"] for i in items[:len(seen)]] and len(seen) < len(items)


def test_the_client_uploads_text_follows_its_job_and_sends_feedback_about_it(served: Served):
    site = "client-uploads.test"
    with Gleaner(served.url, OPERATOR_SECRET) as gleaner:
        accepted = gleaner.ingest(site, text="# Opening hours\n\nThe reading room opens at nine on weekdays.",
                                  format="markdown", path="/hours.md")
        job = gleaner.ingest_job(accepted["job_id"])
        for _ in range(100):  # landed on a thread of the server: searchable when the job says so
            if job["status"] in ("succeeded", "failed"):
                break
            time.sleep(0.1)
            job = gleaner.ingest_job(accepted["job_id"])
        assert job["status"] == "succeeded" and job["version"] == 1 and job["error"] is None
        hits = gleaner.search("when does the reading room open", site=site, limit=3)
        assert hits and hits[0]["document_id"] == job["document_id"]
        given = gleaner.feedback(site, "The reading room opens at ten on weekdays, not nine.",
                                 about=job["document_id"])
        assert given["version"] == 1 and given["document_id"] != job["document_id"]
        with pytest.raises(ApiError) as unknown:
            gleaner.ingest_job("00000000-0000-4000-8000-000000000000")
        assert unknown.value.status == 404
        # A client's validation: a flag on the upload, kept as the operator's on its version.
        flagged = gleaner.remark(job["document_id"], "Opening hours changed in May.", kind="flag")
        assert (flagged["kind"], flagged["by"], flagged["version"]) == ("flag", "operator", 1)
        assert [r["id"] for r in gleaner.remarks(job["document_id"])] == [flagged["id"]]
        folded = create_composite(served.deps, site, "Hours", [f"upload://{site}/hours.md"])
        drain_local(served.deps)
        edited = gleaner.edit_composite(folded.id, "# Hours\n\nThe reading room opens at ten.", note="May")
        assert edited["composite"]["status"] == "edited" and edited["versions"][-1]["by"] == "operator"
