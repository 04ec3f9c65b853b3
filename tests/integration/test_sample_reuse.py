"""A recrawl reuses a section's decision while its sample page answers 304, and decides again when it changed."""

from __future__ import annotations

from gleaner.demosite.testsite import Page
from gleaner.runtime.runner import crawl, new_request

from .db_helpers import rows
from .sites import demo_site, set_version

SITE = "demo.test"


def run(deps, site, **kw):
    return crawl(deps, new_request(site.url + "/", site_domain=SITE, **kw))


def decisions(deps, run_id):
    return {r[0]: r[1:] for r in rows(
        deps, "SELECT d.path, c.decision::text, c.decision_source::text, c.decision_reason, c.decision_confidence"
              " FROM knowledge.crawl_page_decisions c JOIN knowledge.documents d ON d.id = c.document_id"
              " WHERE c.run_id = :r", r=run_id)}


def samples(deps, run_id):
    """path -> (sample_uri, the decision's sample metadata) of each section sample of the run."""
    return {r[0]: (r[1], r[2].get("sample", {})) for r in rows(
        deps, "SELECT d.path, c.sample_uri, c.decision_metadata FROM knowledge.crawl_page_decisions c"
              " JOIN knowledge.documents d ON d.id = c.document_id"
              " WHERE c.run_id = :r AND c.sample_uri IS NOT NULL", r=run_id)}


def test_a_recrawl_whose_samples_answer_304_carries_every_decision_over_with_a_sample_blob_of_its_own(deps):
    with demo_site() as site:
        first = run(deps, site)
        before = len(site.log)
        second = run(deps, site)
        recrawl_log = site.log[before:]
    assert decisions(deps, second["run_id"]) == decisions(deps, first["run_id"])
    old, new = samples(deps, first["run_id"]), samples(deps, second["run_id"])
    assert old.keys() == new.keys() and len(new) >= 4
    for path, (uri, seen) in new.items():
        assert f"/runs/{second['run_id']}/samples/" in uri  # samples stay per run (DESIGN), linked, not re-made
        assert deps.blobs.get(uri) == deps.blobs.get(old[path][0])
        assert seen["decided_in_run"] == first["run_id"] and seen["etag"]
        asked = [r for r in recrawl_log if r.path == path]
        # One conditional GET: the sample's (or the walk's); scrape settles the page on that answer.
        assert len(asked) == 1 and "if-none-match" in asked[0].headers
    assert second["snapshots"]["unchanged"] == second["fetched"] + second["not_modified"]


def test_a_changed_sample_page_is_sampled_and_decided_again(deps):
    with demo_site() as site:
        first = run(deps, site)
        docs_sample = next(p for p in samples(deps, first["run_id"]) if p.startswith("/docs/"))
        # The section's sample is now a near-empty page.
        site.pages[docs_sample] = Page("<!doctype html><html><head><title>Moved</title></head>"
                                       "<body><main><h1>Moved</h1></main></body></html>")
        second = run(deps, site)
    seen = samples(deps, second["run_id"])[docs_sample][1]
    assert seen["decided_in_run"] == second["run_id"]
    now = decisions(deps, second["run_id"])
    assert now[docs_sample][0] == "exclude" and "near-empty" in now[docs_sample][2]
    # One near-empty page is evidence about itself: the section's other pages, read too, are kept.
    assert {now[p][0] for p in now if p.startswith("/docs/") and p != docs_sample} == {"include"}
    assert all(now[p] == v for p, v in decisions(deps, first["run_id"]).items() if not p.startswith("/docs"))


def test_a_sample_whose_page_changed_but_stays_an_article_is_extracted_again(deps):
    with demo_site() as site:
        first = run(deps, site)
        blog_sample = next(p for p in samples(deps, first["run_id"]) if p.startswith("/blog"))
        set_version(site, blog_sample)
        second = run(deps, site)
    uri, seen = samples(deps, second["run_id"])[blog_sample]
    assert seen["decided_in_run"] == second["run_id"]
    assert deps.blobs.get(uri) != deps.blobs.get(samples(deps, first["run_id"])[blog_sample][0])
    assert decisions(deps, second["run_id"]) == decisions(deps, first["run_id"])


def test_other_exclude_globs_or_a_lost_sample_blob_mean_the_section_is_sampled_afresh(deps):
    with demo_site() as site:
        first = run(deps, site)
        second = run(deps, site, exclude=("/pricing",))
        for uri, _seen in samples(deps, second["run_id"]).values():
            (deps.blobs.root / uri).unlink()  # run artefacts expire
        third = run(deps, site, exclude=("/pricing",))
    assert {s["decided_in_run"] for _u, s in samples(deps, second["run_id"]).values()} == {second["run_id"]}
    assert {s["decided_in_run"] for _u, s in samples(deps, third["run_id"]).values()} == {third["run_id"]}
    assert decisions(deps, third["run_id"])["/pricing"][0] == "exclude"
    assert first["status"] == third["status"] == "finished"
