"""The five stages end to end on a real PostgreSQL, a local blob directory and a loopback site."""

from __future__ import annotations

import hashlib
import json

from gleaner.messages import Message
from gleaner.provenance.canonical import canonical_text, slice_text
from gleaner.runtime.runner import crawl, new_request
from gleaner.stages import dispatch
from gleaner.store.backends.blobs import map_key

from .db_helpers import counts, decision_of, rows, scalar
from .sites import demo_site, set_version

SITE = "demo.test"
INCLUDED = ["/", "/about", "/blog", "/blog/2025/launch", "/blog/2026/polite-crawling", "/blog/2026/provenance",
            "/blog/2026/why-snapshots", "/docs/api", "/docs/configuration", "/docs/getting-started",
            "/docs/install", "/docs/troubleshooting", "/pricing"]


def run(deps, site, **kw):
    return crawl(deps, new_request(site.url + "/", site_domain=SITE, **kw))


def snapshot_blobs(deps):
    return deps.blobs.list(f"domains/{SITE}/document-snapshots/")


def test_a_crawl_lands_documents_decisions_snapshots_and_blobs_at_the_contracted_paths(deps):
    with demo_site() as site:
        summary = run(deps, site)
    assert summary["status"] == "finished"
    docs = rows(deps, "SELECT path, status::text, url_hash, canonical_url, current_snapshot_id FROM knowledge.documents"
                      " WHERE site_domain = :s ORDER BY path", s=SITE)
    active = [d[0] for d in docs if d[1] == "active"]
    assert active == INCLUDED
    for path, _status, page_id, canonical, _current in docs:
        assert page_id == hashlib.sha1(canonical.encode()).hexdigest()
        assert canonical == site.url + path if path != "/" else site.url + "/"
    snaps = rows(deps, "SELECT s.document_id, s.version, s.content_hash, s.processed_markdown_ref, s.raw_markdown_ref,"
                       " s.produced_by_run_id, s.extraction_metadata FROM knowledge.document_snapshots s")
    assert len(snaps) == len(INCLUDED)
    for doc_id, version, content_hash, content_ref, raw_ref, run_id, meta in snaps:
        prefix = f"domains/{SITE}/document-snapshots/{doc_id}/{content_hash}"
        assert (version, content_ref, raw_ref, str(run_id)) == (1, prefix + "/content.md", prefix + "/raw.md",
                                                                summary["run_id"])
        body = deps.blobs.get(content_ref)
        assert hashlib.sha1(body).hexdigest() == content_hash
        assert meta["raw_content_hash"] == hashlib.sha1(deps.blobs.get(raw_ref)).hexdigest()
        assert meta["extractor"].startswith("trafilatura")
    links = json.loads(deps.blobs.get(map_key(SITE, summary["run_id"])))
    assert {link["url"] for link in links["links"]} == {d[3] for d in docs}
    raw_map_uri = scalar(deps, "SELECT raw_map_uri FROM knowledge.crawl_runs WHERE id = :r", r=summary["run_id"])
    assert raw_map_uri == map_key(SITE, summary["run_id"])
    samples = deps.blobs.list(f"domains/{SITE}/runs/{summary['run_id']}/samples/")
    assert len(samples) >= 4  # one per sampled section


def test_the_run_summary_counts_what_the_ledger_holds(deps):
    with demo_site() as site:
        summary = run(deps, site)
    assert summary == {**summary, "discovered": 17, "included": 14, "excluded": 3, "fetched": 13, "failed": 0,
                       "refused": 1, "limited": 0}  # refused: the page robots.txt denies is not a failure
    assert summary["snapshots"] == {"new": 13, "changed": 0, "unchanged": 0}
    outcomes = dict(rows(deps, "SELECT fetch_outcome::text, count(*) FROM knowledge.crawl_page_decisions"
                               " WHERE run_id = :r AND fetch_outcome IS NOT NULL GROUP BY 1", r=summary["run_id"]))
    assert outcomes == {"fetched": 13, "robots-denied": 1}


def test_disallowed_paths_are_never_requested_and_recorded_as_robots_denied(deps):
    with demo_site() as site:
        summary = run(deps, site)
        assert site.requested("/private/roadmap") == 0
        assert site.requested("/robots.txt") >= 1
    row = decision_of(deps, summary["run_id"], "/private/roadmap")
    assert row["fetch_outcome"] == "robots-denied" and row["status"] == "failed"


def test_excluded_pages_are_never_scraped_and_are_skipped_in_the_tree(deps):
    with demo_site() as site:
        summary = run(deps, site)
        assert site.requested("/login") == 0
        assert site.requested("/tag/crawling") == 0
        assert site.requested("/downloads/brochure") == 1  # its section's sample, found not to be HTML
    for path, why in (("/login", "login page"), ("/tag/crawling", "tag page"), ("/downloads/brochure", "not HTML")):
        row = decision_of(deps, summary["run_id"], path)
        assert row["decision"] == "exclude" and why in row["reason"]
        assert row["scrape_policy"] == "skip" and row["fetch_outcome"] is None and row["status"] == "discovered"


def test_an_unchanged_recrawl_writes_no_snapshot_row_and_no_blob_and_uses_conditional_gets(deps):
    with demo_site() as site:
        run(deps, site)
        before, blobs_before = counts(deps), deps.blobs.list("domains/")
        n_requests = len(site.log)
        second = run(deps, site)
        conditional = [r for r in site.log[n_requests:] if "if-none-match" in r.headers]
    after = counts(deps)
    assert second["status"] == "finished"
    assert after["document_snapshots"] == before["document_snapshots"]
    assert after["canonical_texts"] == before["canonical_texts"]
    new_blobs = set(deps.blobs.list("domains/")) - set(blobs_before)
    assert all(f"/runs/{second['run_id']}/" in key for key in new_blobs)  # only the run's map and samples
    assert not [k for k in new_blobs if "/raw/" in k or "/content/" in k]
    assert second["snapshots"] == {"new": 0, "changed": 0, "unchanged": 13}
    assert len(conditional) >= 13


def test_a_recrawl_without_validators_still_writes_nothing_for_unchanged_pages(deps):
    with demo_site() as site:
        for page in site.pages.values():
            page.conditional = False
        run(deps, site)
        before, blobs_before = counts(deps), set(snapshot_blobs(deps))
        second = run(deps, site)
    assert counts(deps)["document_snapshots"] == before["document_snapshots"]
    assert set(snapshot_blobs(deps)) == blobs_before
    assert second["snapshots"]["unchanged"] == 13 and second["fetched"] == 13


def test_changing_one_page_yields_version_2_for_that_page_only(deps):
    with demo_site() as site:
        run(deps, site)
        set_version(site, "/docs/install")
        second = run(deps, site)
    assert second["snapshots"] == {"new": 0, "changed": 1, "unchanged": 12}
    versions = rows(deps, "SELECT d.path, max(s.version), count(*) FROM knowledge.document_snapshots s"
                          " JOIN knowledge.documents d ON d.id = s.document_id GROUP BY d.path")
    assert {p: v for p, v, _ in versions if v > 1} == {"/docs/install": 2}
    chain = rows(deps, "SELECT s.version, s.change_signal::text, s.id = d.current_snapshot_id"
                       " FROM knowledge.document_snapshots s JOIN knowledge.documents d ON d.id = s.document_id"
                       " WHERE d.path = '/docs/install' ORDER BY s.version")
    assert chain == [(1, None, False), (2, "hash_changed", True)]
    assert len(snapshot_blobs(deps)) == 2 * 14  # content.md + raw.md for 13 v1 and one v2


def test_every_span_slices_to_the_text_of_its_block(deps):
    with demo_site() as site:
        run(deps, site)
    texts = rows(deps, "SELECT t.text_hash, t.body FROM knowledge.canonical_texts t")
    assert len(texts) == 13
    for text_hash, body in texts:
        spans = rows(deps, "SELECT span_start, span_end, kind FROM knowledge.text_spans WHERE text_hash = :h"
                           " ORDER BY ordinal", h=text_hash)
        kinds = {k for _s, _e, k in spans}
        assert {"heading", "paragraph", "list_item", "table", "code"} <= kinds
        blocks = [b.strip() for b in body.split("\n\n")]
        for start, end, kind in spans:
            piece = slice_text(body, start, end)
            assert piece.strip() == piece and piece
            assert any(piece in block for block in blocks), (kind, piece)
        assert body == canonical_text(body)


def test_redelivering_every_message_changes_nothing(make_deps):
    deps = make_deps()
    seen: list[Message] = []
    with demo_site() as site:
        crawl(deps, new_request(site.url + "/", site_domain=SITE), lambda _t, m: seen.append(m))
        before, blobs = counts(deps), deps.blobs.list("domains/")
        summary = deps.metadata.run_summary(seen[0].run_id)
        for message in seen:
            dispatch(message, deps)
        deps.bus.drain()
    assert counts(deps) == before
    assert deps.blobs.list("domains/") == blobs
    assert deps.metadata.run_summary(seen[0].run_id) == summary


def test_a_page_that_fails_mid_batch_is_recorded_and_the_rest_complete(deps):
    from gleaner.demosite.testsite import Page

    with demo_site(**{"/docs/api": Page("<h1>boom</h1>", status=500)}) as site:
        summary = run(deps, site)
    assert summary["status"] == "finished"
    row = decision_of(deps, summary["run_id"], "/docs/api")
    assert row["fetch_outcome"] == "unavailable" and "500" in row["fetch_reason"]
    assert summary["snapshots"]["new"] == 12 and (summary["failed"], summary["refused"]) == (1, 1)


def test_include_globs_limit_and_depth_bound_the_map(deps):
    with demo_site() as site:
        summary = run(deps, site, include=("/docs/*",), limit=3)
    paths = [r[0] for r in rows(deps, "SELECT d.path FROM knowledge.crawl_page_decisions c JOIN knowledge.documents d"
                                      " ON d.id = c.document_id WHERE c.run_id = :r", r=summary["run_id"])]
    assert len(paths) == 3 and all(p.startswith("/docs/") or p == "/" for p in paths)


def test_a_run_resumed_after_a_lost_hand_off_announces_its_pages_again(make_deps):
    """A crash between recording fetches and publishing pages-fetched must not strand the run."""
    from gleaner.messages import PagesFetched, ScrapeBatch
    from gleaner.runtime.runner import resume

    deps = make_deps()
    batches: list[ScrapeBatch] = []
    with demo_site() as site:
        lost: list[PagesFetched] = []

        def lose_first_hand_off(message):  # the snapshot stage never saw the first pages-fetched
            if not lost:
                lost.append(message)
                return
            dispatch(message, deps)

        from gleaner.stages import wire

        wire(deps.bus, deps)
        deps.bus.handlers[PagesFetched.topic] = [lose_first_hand_off]
        summary = crawl(deps, new_request(site.url + "/", site_domain=SITE),
                        lambda _t, m: batches.append(m) if isinstance(m, ScrapeBatch) else None)
        # Fetched, never snapshotted, and nothing left to deliver: the run says so instead of staying scraping.
        # (the pages go on as they are fetched: the lost message held some of them, the others were stored)
        assert summary["status"] == "failed" and f"{len(lost[0].pages)} pages unsettled" in summary["error"]
        requests_before = len(site.log)
        resume(make_deps(), summary["run_id"])  # another process sends the batches again
        assert len(site.log) == requests_before  # nothing fetched twice
    final = deps.metadata.run_summary(summary["run_id"])
    assert final["status"] == "finished" and final["snapshots"]["new"] == 13


def test_robots_txt_is_read_once_per_host_per_run_even_across_processes(make_deps):
    """Two Deps on one database stand for two Cloud Functions instances serving one run's stages."""
    from gleaner.messages import ScrapeBatch

    first, second = make_deps(), make_deps()
    batches: list[ScrapeBatch] = []
    with demo_site() as site:
        request = new_request(site.url + "/", site_domain=SITE)
        from gleaner.stages import wire

        wire(first.bus, first)
        first.bus.handlers[ScrapeBatch.topic] = [batches.append]  # the scrape tasks go elsewhere
        dispatch(request, first)
        first.bus.drain()
        assert site.requested("/robots.txt") == 1 and batches
        wire(second.bus, second)
        for batch in batches:  # another instance scrapes, snapshots and ingests
            dispatch(batch, second)
        second.bus.drain()
        assert site.requested("/robots.txt") == 1
        assert site.requested("/private/roadmap") == 0
    summary = second.metadata.run_summary(request.run_id)
    assert summary["status"] == "finished" and summary["snapshots"]["new"] == 13
