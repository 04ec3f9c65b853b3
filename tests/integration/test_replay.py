"""Replaying a run's pages from what is stored: a run of its own that fetches nothing, re-extracts kept
originals, detects change as any run does, takes ingest again, and never rolls a page back."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest
import sqlalchemy as sa

from gleaner.demosite.demo import demo_pages
from gleaner.demosite.testsite import Page, TestSite
from gleaner.extract import page as page_module
from gleaner.runtime.runner import crawl, new_request
from gleaner.stages import replay as replay_module
from gleaner.stages.replay import replay

from ..feed_site import article_html
from .db_helpers import rows, scalar
from .test_documents_crawl import FILLER, REPORTS, SITE, pdf_site
from .test_notifications import env as env  # a fixture
from .test_notifications import gleaner

PDF_PATH = "/reports/annual-2024.pdf"


def current(deps, site, path):
    [(doc_id, snapshot_id, version)] = rows(
        deps, "SELECT d.id, d.current_snapshot_id, s.version FROM knowledge.documents d"
              " JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id WHERE d.canonical_url = :u",
        u=site.url + path)
    return str(doc_id), str(snapshot_id), version


def test_a_replay_fetches_nothing_redoes_lost_ingest_and_leaves_out_what_moved_on(deps, monkeypatch):
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pdf_site(pages)
        first = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        asked = len(site.log)
        # A lost ingest: the about page's current version has no canonical text.
        _, about_snapshot, _ = current(deps, site, "/about")
        with deps.engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM knowledge.snapshot_texts WHERE snapshot_id = :s"), {"s": about_snapshot})

        same = replay(deps, first["run_id"], triggered_by="backoffice")
        assert len(site.log) == asked  # the site was asked nothing
        assert (same["replayed"], same["left_out"], same["status"]) == (5, [], "finished")
        run = deps.metadata.run_summary(same["run_id"])
        assert run is not None and run["snapshots"] == {"new": 0, "changed": 0, "unchanged": 5}
        assert scalar(deps, "SELECT mode::text || '/' || triggered_by::text FROM knowledge.crawl_runs WHERE id = :r",
                      r=same["run_id"]) == "reprocess_from_snapshot/backoffice"
        assert scalar(deps, "SELECT count(*) FROM knowledge.snapshot_texts WHERE snapshot_id = :s",
                      s=about_snapshot) == 1  # ingested again
        reasons = {r[0] for r in rows(deps, "SELECT fetch_reason FROM knowledge.crawl_page_decisions"
                                            " WHERE run_id = :r", r=same["run_id"])}
        assert all("not fetched" in r or "the same text" in r for r in reasons), reasons

        # The extractor changes: the kept original of each PDF is read again, and reads differently.
        real = page_module.extract_document

        def extractor_of_tomorrow(body: bytes) -> page_module.ExtractedPage:
            out = real(body)
            content = out.content + b"\nExtracted anew.\n"
            return replace(out, content=content, content_hash=hashlib.sha1(content).hexdigest())

        monkeypatch.setattr(replay_module, "extract_document", extractor_of_tomorrow)
        pages["/about"] = Page(article_html("About", ["The cooperative moved to the hills.", FILLER,
                                                      "It has kept records of every orchard since then."]))
        pages["/about"].modified += 60
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
        asked = len(site.log)
        anew = replay(deps, first["run_id"])
    assert len(site.log) == asked
    assert anew["left_out"] == [{"url": site.url + "/about",
                                 "reason": "a later version than v1 is current: a replay never rolls a page back"}]
    run = deps.metadata.run_summary(anew["run_id"])
    assert run is not None and run["status"] == "finished"
    assert run["snapshots"] == {"new": 0, "changed": len(REPORTS), "unchanged": 1}
    doc_id, _, version = current(deps, site, PDF_PATH)
    assert version == 2
    newest = deps.metadata.snapshots_of(doc_id)[0]
    assert b"Extracted anew." in deps.blobs.get(newest["content_ref"])
    assert [e.type for e in deps.metadata.list_events(site=SITE) if e.document_id == doc_id][-1] == "document.changed"


def test_runs_replay_on_the_command_line_names_the_new_run_and_what_it_left_out(deps, env):
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(demo_pages(site.url))
        first = crawl(deps, new_request(site.url + "/", site_domain="demo.test"))
        asked = len(site.log)
        done = gleaner(env, "runs", "replay", first["run_id"], "--json")
        assert len(site.log) == asked
    assert done.exit_code == 0, done.output
    answer = json.loads(done.stdout)
    assert (answer["replay_of"], answer["status"], answer["left_out"]) == (first["run_id"], "finished", [])
    assert answer["replayed"] == first["fetched"] + first["not_modified"] == answer["fetched"]
    missing = gleaner(env, "runs", "replay", "00000000-0000-0000-0000-000000000000")
    assert missing.exit_code != 0 and "no run" in missing.stderr
    with pytest.raises(replay_module.RunNotFound):
        replay(deps, "00000000-0000-0000-0000-000000000000")
