"""Duplicates across URLs: an exact copy and a reformatted one each open one conflict, and reruns add none."""

from __future__ import annotations

import sqlalchemy as sa

from gleaner.provenance.conflicts import ConflictStatus
from gleaner.runtime.runner import crawl, new_request
from gleaner.stages.conflicts import label_duplicates

from .provenance_site import BODY, LEAD, article_html, news_site

OTHER = ["The ferry company announced a new winter timetable with two extra crossings on Saturdays, starting in "
         "December and running until the end of March.", *BODY[:1]]


def test_the_same_article_at_two_urls_and_a_reformatted_copy_at_a_third_open_one_conflict_each(deps):
    articles = {
        "/news/budget": article_html("Budget", [LEAD, *BODY]),
        "/mirror/budget": article_html("Budget", [LEAD, *BODY]),
        "/reprint/budget": article_html("Budget", [LEAD, *BODY], reformatted=True),
        "/news/ferries": article_html("Ferries", OTHER),
    }
    with news_site(articles) as site:
        crawl(deps, new_request(site.url + "/", site_domain="news.test"))
        conflicts = deps.provenance.list_conflicts("news.test")
        assert len(conflicts) == 2
        assert {c["details"]["kind"] for c in conflicts} == {"exact", "near"}
        assert all(c["status"] == "open" and c["conflict_type"] == "duplicate" for c in conflicts)
        copies = {site.url + p for p in ("/news/budget", "/mirror/budget", "/reprint/budget")}
        urls = [u for c in conflicts for u in (c["a"]["url"], c["b"]["url"])]
        assert set(urls) == copies  # every copy is labelled; the unrelated article is not
        original = max(copies, key=urls.count)  # the one both conflicts name
        assert urls.count(original) == 2
        opened = [e for e in deps.metadata.list_events(site="news.test") if e.type == "conflict.opened"]
        assert len(opened) == 2 and {e.document_id for e in opened} <= {c["b"]["document_id"] for c in conflicts} | {
            c["a"]["document_id"] for c in conflicts}

        crawl(deps, new_request(site.url + "/", site_domain="news.test"))
    with deps.engine.connect() as conn:
        current = conn.execute(sa.text("SELECT current_snapshot_id FROM knowledge.documents"
                                       " WHERE current_snapshot_id IS NOT NULL")).scalars().all()
    assert label_duplicates(deps, [str(s) for s in current]) == []  # the detector again finds what is recorded
    assert len(deps.provenance.list_conflicts("news.test")) == 2
    assert len([e for e in deps.metadata.list_events(site="news.test") if e.type == "conflict.opened"]) == 2


def test_an_operator_settles_a_conflict_and_it_stays_settled_when_found_again(deps):
    articles = {"/news/budget": article_html("Budget", [LEAD, *BODY]),
                "/mirror/budget": article_html("Budget", [LEAD, *BODY])}
    with news_site(articles) as site:
        crawl(deps, new_request(site.url + "/", site_domain="news.test"))
    (conflict,) = deps.provenance.list_conflicts("news.test")
    assert deps.provenance.set_conflict_status(conflict["id"], ConflictStatus.FALSE_POSITIVE)
    with deps.engine.connect() as conn:
        current = conn.execute(sa.text("SELECT current_snapshot_id FROM knowledge.documents"
                                       " WHERE current_snapshot_id IS NOT NULL")).scalars().all()
    assert label_duplicates(deps, [str(s) for s in current]) == []
    assert deps.provenance.list_conflicts("news.test", ConflictStatus.OPEN) == []
    (settled,) = deps.provenance.list_conflicts("news.test", ConflictStatus.FALSE_POSITIVE)
    assert settled["id"] == conflict["id"]
    assert not deps.provenance.set_conflict_status("00000000-0000-0000-0000-000000000000", ConflictStatus.RESOLVED)
