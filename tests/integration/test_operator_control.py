"""Operator control on a real PostgreSQL and a loopback site: rules, ticks, the adaptive schedule, review,
routings and composites."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from gleaner.app import Deps
from gleaner.bus.local import LocalBus
from gleaner.cli.operating import drain_local
from gleaner.decide.port import PageDecision, PageFacts
from gleaner.decide.rules import RuleDecider
from gleaner.operator.review import decide, review_list
from gleaner.operator.routing import create_composite, list_composites
from gleaner.operator.rules import add_rule, list_rules, remove_rule
from gleaner.operator.schedule import tick
from gleaner.operator.sites import add_site, get_site
from gleaner.runtime.runner import crawl, new_request

from .db_helpers import rows, scalar
from .sites import demo_site, set_version

SITE = "demo.test"
T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def run(deps, site):
    return crawl(deps, new_request(site.url + "/", site_domain=SITE))


def run_tick(deps, now):
    report = tick(deps, now)
    drain_local(deps)
    return report


def doc(deps, path):
    found = rows(deps, "SELECT id, status::text, scrape_policy::text, current_snapshot_id, skip_reason"
                       " FROM knowledge.documents WHERE site_domain = :s AND path = :p", s=SITE, p=path)
    assert found, f"no document at {path}"
    doc_id, status, policy, current, why = found[0]
    return {"id": str(doc_id), "status": status, "scrape_policy": policy,
            "current_snapshot_id": str(current) if current else None, "skip_reason": why}


def events_of(deps, document_id):
    return [e.type for e in deps.metadata.list_events(site=SITE) if e.document_id == document_id]


def ledger(deps, run_id, path):
    return rows(deps, "SELECT c.decision::text, c.decision_source::text, c.fetch_outcome::text"
                      " FROM knowledge.crawl_page_decisions c JOIN knowledge.documents d ON d.id = c.document_id"
                      " WHERE c.run_id = :r AND d.path = :p", r=run_id, p=path)


def test_a_skip_rule_survives_a_scheduled_run_without_excludes_and_the_site_never_sees_the_skipped_paths(deps):
    with demo_site() as site:
        run(deps, site)
        assert doc(deps, "/blog/2026/provenance")["scrape_policy"] == "scrape"
        add_site(deps, site.url + "/", site_domain=SITE, every="1h", now=T0)
        rule, applied = add_rule(deps, SITE, "/blog/*", "skip", "not our knowledge")
        # Materialised at once onto the documents the rule matches, the section page included.
        assert doc(deps, "/blog/2026/provenance")["scrape_policy"] == "skip"
        assert doc(deps, "/blog")["scrape_policy"] == "skip"
        assert len(applied.skipped) == 5
        before = len(site.log)
        report = run_tick(deps, T0)
        scheduled = site.paths()[before:]
    assert [s.site_domain for s in report.started] == [SITE]
    assert scheduled, "the scheduled run requested nothing"
    assert not [p for p in scheduled if p.startswith("/blog")]
    run_id = report.started[0].run_id
    assert deps.metadata.run_summary(run_id)["status"] == "finished"
    # One ledger row per run for a skipped URL: excluded, by the operator, never fetched.
    assert ledger(deps, run_id, "/blog/2026/provenance") == [("exclude", "operator", None)]

    remove_rule(deps, rule.id)
    assert doc(deps, "/blog/2026/provenance")["scrape_policy"] == "scrape"
    assert list_rules(deps, SITE) == []


def test_a_rule_skips_pages_first_discovered_after_it_was_added(deps):
    add_rule(deps, SITE, "/docs/*", "skip")
    with demo_site() as site:
        summary = run(deps, site)
        assert not [p for p in site.paths() if p.startswith("/docs")]
    assert doc(deps, "/docs/install")["scrape_policy"] == "skip"
    assert ledger(deps, summary["run_id"], "/docs/install") == [("exclude", "operator", None)]


def test_a_blocked_page_is_versioned_but_never_ingested_or_routed_until_the_rule_goes(deps):
    rule, _ = add_rule(deps, SITE, "/pricing", "block", "legal review")
    with demo_site() as site:
        run(deps, site)
        assert site.requested("/pricing") >= 1  # gate 2 fetches
    pricing = doc(deps, "/pricing")
    assert pricing["status"] == "blocked"
    assert pricing["current_snapshot_id"] is not None  # versioned
    assert scalar(deps, "SELECT count(*) FROM knowledge.snapshot_texts WHERE snapshot_id = :s",
                  s=pricing["current_snapshot_id"]) == 0  # no canonical text
    assert deps.metadata.routings_of(pricing["id"]) == []
    assert deps.metadata.routings_of(doc(deps, "/about")["id"]) == [
        {"destination": "rag", "target_ref": None, "priority": None, "enabled": True}]

    assert events_of(deps, pricing["id"]) == ["document.blocked"]  # never document.new: no change notification

    _, applied = remove_rule(deps, rule.id)
    assert events_of(deps, pricing["id"]) == ["document.blocked", "document.unblocked"]
    assert applied.unblocked_snapshots == (pricing["current_snapshot_id"],)
    from gleaner.messages import SnapshotsWritten

    deps.bus.publish(SnapshotsWritten(run_id=None, site_domain=SITE, snapshot_ids=applied.unblocked_snapshots))
    drain_local(deps)
    assert doc(deps, "/pricing")["status"] == "active"
    assert scalar(deps, "SELECT count(*) FROM knowledge.snapshot_texts WHERE snapshot_id = :s",
                  s=pricing["current_snapshot_id"]) == 1
    assert [r["destination"] for r in deps.metadata.routings_of(pricing["id"])] == ["rag"]


def test_blocking_a_routed_page_takes_its_routing_away_and_a_recrawl_keeps_it_blocked(deps):
    with demo_site() as site:
        run(deps, site)
        about = doc(deps, "/about")
        assert deps.metadata.routings_of(about["id"])
        add_rule(deps, SITE, "/about", "block")
        assert deps.metadata.routings_of(about["id"]) == []
        set_version(site, "/about")
        site.pages["/about"].modified += 60
        second = run(deps, site)
    assert second["snapshots"]["changed"] == 1
    after = doc(deps, "/about")
    assert after["status"] == "blocked" and after["current_snapshot_id"] != about["current_snapshot_id"]
    assert scalar(deps, "SELECT count(*) FROM knowledge.snapshot_texts WHERE snapshot_id = :s",
                  s=after["current_snapshot_id"]) == 0
    assert deps.metadata.routings_of(about["id"]) == []
    assert events_of(deps, about["id"]) == ["document.new", "document.blocked"]  # the new version goes unannounced


def test_two_ticks_at_once_start_one_run_per_due_site(make_deps):
    deps = make_deps()
    add_site(deps, "http://127.0.0.1:9/", site_domain=SITE, every="1h", now=T0)
    buses = [LocalBus(), LocalBus()]
    tickers = [Deps(deps.settings, bus_override=bus) for bus in buses]
    reports = []
    barrier = threading.Barrier(2)

    def go(d):
        barrier.wait()
        reports.append(tick(d, T0 + timedelta(minutes=1)))

    threads = [threading.Thread(target=go, args=(d,)) for d in tickers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    again = tick(tickers[0], T0 + timedelta(minutes=2))
    for d in tickers:
        d.close()
    assert sum(len(r.started) for r in reports) == 1
    assert sum(bus.pending() for bus in buses) == 1
    assert again.started == ()
    assert get_site(deps, SITE).next_run_at == (T0 + timedelta(minutes=61)).isoformat()


def test_a_site_still_crawling_is_left_due_and_started_once_its_run_settles(deps):
    site = add_site(deps, "http://127.0.0.1:9/", site_domain=SITE, every="1h", now=T0)
    first = tick(deps, T0).started[0]
    host = scalar(deps, "SELECT source_host_id FROM knowledge.sites WHERE id = :i", i=site.id)
    deps.metadata.create_run(first.run_id, SITE, str(host), site.target_url, {}, "website_mapping", "cron")
    deps.metadata.set_run_status(first.run_id, "scraping")
    later = tick(deps, T0 + timedelta(hours=2))
    assert (later.started, later.still_running) == ((), (SITE,))
    deps.metadata.set_run_status(first.run_id, "finished")
    assert [s.site_domain for s in tick(deps, T0 + timedelta(hours=2)).started] == [SITE]


def test_watch_ticks_on_its_cadence_until_its_rounds_are_done(deps):
    from gleaner.operator.schedule import watch

    add_site(deps, "http://127.0.0.1:9/", site_domain=SITE, every="1h", now=T0)
    clock = iter([T0, T0 + timedelta(minutes=30), T0 + timedelta(minutes=61)])
    slept, reports = [], []
    started = watch(deps, every=1800, rounds=3, after_tick=reports.append, sleep=slept.append,
                    clock=lambda: next(clock))
    assert (started, slept) == (2, [1800, 1800])
    assert [len(r.started) for r in reports] == [1, 0, 1]


def test_a_manual_site_is_never_due(deps):
    add_site(deps, "http://127.0.0.1:9/", site_domain=SITE, now=T0)
    assert tick(deps, T0 + timedelta(days=365)).started == ()


def test_auto_shortens_the_interval_when_pages_change_and_lengthens_it_when_they_do_not(deps):
    add_site(deps, "http://127.0.0.1:9/", site_domain=SITE, every="auto", now=T0)
    intervals = []
    with demo_site() as site:
        add_site(deps, site.url + "/", site_domain=SITE, every="auto", now=T0)
        now = T0
        for change in (False, True, False, False):
            if change:
                set_version(site, "/docs/install", "/about")
                for path in ("/docs/install", "/about"):
                    site.pages[path].modified += 60
            report = run_tick(deps, now)
            assert len(report.started) == 1, report
            intervals.append(report.started[0].interval_seconds)
            now += timedelta(seconds=intervals[-1])
        assert run_tick(deps, now - timedelta(seconds=1)).started == ()  # not due before its time
    # First crawl (only new pages): no evidence, the start interval stands; then the run that changed
    # two pages halves it; the unchanged run after it lengthens it by half.
    assert intervals == [86400, 86400, 43200, 64800]


class ReviewingDecider(RuleDecider):
    """The rule decider, but a sampled /pricing needs a human (as an unsure LLM decider would say)."""

    def decide(self, facts: PageFacts, exclude: tuple[str, ...] = ()) -> PageDecision:
        if facts.path == "/pricing":
            return PageDecision("needs_review", "prices change often; a human should decide", 0.4, "system")
        return super().decide(facts, exclude)


def test_review_decisions_settle_needs_review_and_persist_across_runs(make_deps):
    base = make_deps()
    deps = Deps(base.settings, bus_override=LocalBus(backoff_seconds=0.01), decider_override=ReviewingDecider())
    try:
        with demo_site() as site:
            first = run(deps, site)
            assert [i.path for i in review_list(deps, SITE) if i.decision == "needs_review"] == ["/pricing"]
            assert site.requested("/pricing") == 1  # its sample only

            decide(deps, site.url + "/pricing", "include")
            assert [i for i in review_list(deps, SITE) if i.decision == "needs_review"] == []
            assert ledger(deps, first["run_id"], "/pricing")[0][:2] == ("include", "operator")
            second = run(deps, site)
            assert ledger(deps, second["run_id"], "/pricing") == [("include", "operator", "fetched")]

            decide(deps, site.url + "/pricing", "exclude", reason="moved to the sales deck")
            before = site.requested("/pricing")
            third = run(deps, site)
            assert site.requested("/pricing") == before
        assert ledger(deps, third["run_id"], "/pricing") == [("exclude", "operator", None)]
        assert doc(deps, "/pricing")["scrape_policy"] == "skip"
    finally:
        deps.close()


def test_an_operator_include_outranks_a_skip_rule(deps):
    with demo_site() as site:
        run(deps, site)
        add_rule(deps, SITE, "/docs/*", "skip")
        decide(deps, site.url + "/docs/install", "include")
        assert doc(deps, "/docs/install")["scrape_policy"] == "scrape"
        assert doc(deps, "/docs/api")["scrape_policy"] == "skip"
        before = len(site.log)
        run(deps, site)
        fetched = site.paths()[before:]
    assert "/docs/install" in fetched and "/docs/api" not in fetched


def test_a_composite_has_its_own_snapshot_takes_over_its_sources_routing_and_goes_stale_when_one_changes(deps):
    with demo_site() as site:
        run(deps, site)
        install, api = doc(deps, "/docs/install"), doc(deps, "/docs/api")
        composite = create_composite(deps, SITE, "Using the API", [site.url + "/docs/install", site.url + "/docs/api"],
                                     kind="feature_map")
        drain_local(deps)
        snap = rows(deps, "SELECT composite_document_id, document_id, version, processed_markdown_ref"
                          " FROM knowledge.document_snapshots WHERE id = :s", s=composite.snapshot_id)[0]
        assert (str(snap[0]), snap[1], snap[2]) == (composite.id, None, 1)
        assert snap[3].startswith(f"domains/{SITE}/document-snapshots/{composite.id}/")
        assert b"# Using the API" in deps.blobs.get(snap[3])
        assert scalar(deps, "SELECT count(*) FROM knowledge.snapshot_texts WHERE snapshot_id = :s",
                      s=composite.snapshot_id) == 1  # ingested
        assert [r["destination"] for r in deps.metadata.routings_of(composite.id)] == ["rag"]
        assert deps.metadata.routings_of(install["id"]) == []  # subsumed
        pinned = {s["document_id"]: s["snapshot_id"] for s in composite.sources}
        assert pinned == {install["id"]: install["current_snapshot_id"], api["id"]: api["current_snapshot_id"]}
        assert [c.status for c in list_composites(deps, SITE)] == ["generated"]

        set_version(site, "/docs/install")
        site.pages["/docs/install"].modified += 60
        run(deps, site)
    [after] = list_composites(deps, SITE)
    assert after.status == "stale"
    assert deps.metadata.routings_of(install["id"]) == []  # still folded into the composite


def test_a_sites_own_budget_bounds_its_scheduled_runs(deps):
    with demo_site() as site:
        add_site(deps, site.url + "/", site_domain=SITE, every="1h", max_requests=5, now=T0)
        report = run_tick(deps, T0)
    summary = deps.metadata.run_summary(report.started[0].run_id)
    assert summary["status"] == "partial"
    assert rows(deps, "SELECT count(*) FROM knowledge.crawl_page_decisions WHERE run_id = :r"
                      " AND fetch_outcome = 'exhausted'", r=summary["run_id"])[0][0] > 0


def lastmod_site(base, lastmods):
    from gleaner.demosite.testsite import Page

    body = "<p>" + "Words about crawling and snapshots and provenance. " * 20 + "</p>"
    pages = {"/": Page("<html><body><h1>Home</h1>" + body + "</body></html>")}
    entries = ""
    for name, lastmod in lastmods.items():
        pages[f"/docs/{name}"] = Page(f"<html><head><title>{name}</title></head><body><h1>{name}</h1>{body}"
                                      f"<p>version {lastmod}</p></body></html>")
        entries += f"<url><loc>{base}/docs/{name}</loc><lastmod>{lastmod}</lastmod></url>"
    pages["/sitemap.xml"] = Page(f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                                 f"{entries}</urlset>", content_type="application/xml")
    return pages


def test_an_auto_site_skips_urls_whose_sitemap_lastmod_is_not_after_their_last_fetch(deps):
    from gleaner.demosite.testsite import TestSite
    from gleaner.operator.lastmod import REASON

    pages = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(lastmod_site(site.url, {"a": "2020-01-01", "b": "2020-01-01", "c": "2020-01-01T10:00:00Z"}))
        add_site(deps, site.url + "/", site_domain=SITE, every="auto", now=T0)
        first = run_tick(deps, T0).started[0].run_id
        assert site.requested("/docs/c") >= 1
        later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        pages.update(lastmod_site(site.url, {"a": "2020-01-01", "b": later, "c": "2020-01-01T10:00:00Z"}))
        before = len(site.log)
        second = run_tick(deps, T0 + timedelta(days=1)).started[0].run_id
        requested = site.paths()[before:]
    assert deps.metadata.run_summary(first)["snapshots"]["new"] == 4
    assert "/docs/c" not in requested  # neither sampled (the section's first page is) nor scraped
    assert "/docs/b" in requested
    assert ledger(deps, second, "/docs/c") == [("include", "rule", "not-modified")]
    assert rows(deps, "SELECT c.fetch_reason FROM knowledge.crawl_page_decisions c JOIN knowledge.documents d"
                      " ON d.id = c.document_id WHERE c.run_id = :r AND d.path = '/docs/c'", r=second)[0][0] == REASON
    assert deps.metadata.run_summary(second)["snapshots"]["changed"] == 1



def test_an_operators_exclusion_holds_whatever_its_reason_says(deps):
    with demo_site() as site:
        run(deps, site)
        decide(deps, site.url + "/docs/install", "exclude", reason="rule: legal asked us to stop")
        before = len(site.log)
        run(deps, site)
        fetched = site.paths()[before:]
    assert "/docs/install" not in fetched
    assert doc(deps, "/docs/install")["scrape_policy"] == "skip"
    assert scalar(deps, "SELECT skip_by_decider FROM knowledge.documents WHERE path = '/docs/install'") is False


class ChangingDecider(RuleDecider):
    """The rule decider, but /about is excluded while ``exclude_about`` is set (a decider changing its mind)."""

    exclude_about = True

    def decide(self, facts: PageFacts, exclude: tuple[str, ...] = ()) -> PageDecision:
        if facts.path == "/about" and self.exclude_about:
            return PageDecision("exclude", "about pages say nothing", 0.9, "system")
        return super().decide(facts, exclude)


def test_a_decider_exclusion_is_decided_again_and_lifted_when_the_decider_includes_it(make_deps):
    base = make_deps()
    decider = ChangingDecider()
    deps = Deps(base.settings, bus_override=LocalBus(backoff_seconds=0.01), decider_override=decider)
    try:
        with demo_site() as site:
            run(deps, site)
            assert doc(deps, "/about")["scrape_policy"] == "skip"
            assert doc(deps, "/about")["skip_reason"] == "rule: about pages say nothing"
            assert scalar(deps, "SELECT skip_by_decider FROM knowledge.documents WHERE path = '/about'") is True
            decider.exclude_about = False
            before = len(site.log)
            run(deps, site)
            fetched = site.paths()[before:]
        assert "/about" in fetched
        assert doc(deps, "/about")["scrape_policy"] == "scrape"
        assert scalar(deps, "SELECT skip_by_decider FROM knowledge.documents WHERE path = '/about'") is False
    finally:
        deps.close()
