"""Search keeps chunks only of texts a document or composite is searched by (migration 0052).

A changed page's earlier version, an aggregate page and a page taken out of search leave their
chunks behind no more; a text another tenant's page still has keeps them.

Real components: the embedded PostgreSQL (with pgvector, or the server GLEANER_TEST_DATABASE_URL
names), alembic's own downgrade and upgrade, a loopback site crawled by the runner.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import command

from gleaner.demosite.testsite import Page, TestSite
from gleaner.retrieval import search
from gleaner.runtime.runner import crawl, new_request
from gleaner.store.backends import db


def _article(title: str, words: str) -> Page:
    body = "".join(f"<p>{words} paragraph {n} says more about the {title.lower()} than the last one did.</p>"
                   for n in range(12))
    return Page(f"<html><head><title>{title}</title></head><body><main><article><h1>{title}</h1>{body}"
                "</article></main></body></html>")


def _site() -> dict[str, Page]:
    return {
        "/": Page('<html><head><title>Home</title></head><body><ul><li><a href="/tides">Tides</a></li>'
                  '<li><a href="/lamps">Lamps</a></li></ul></body></html>'),
        "/tides": _article("Tides", "The moon pulls the ocean twice a day and the harbour fills"),
        "/lamps": _article("Lamps", "A lighthouse lamp turns behind a glass lens all night"),
    }


def _chunks_of(deps, path: str, site: str) -> dict[str, int]:
    """Every text a document of ``path`` ever had, with its chunks now (read as the tables' owner)."""
    with deps.engine.connect().execution_options(**{db.ADMIN_OPTION: True}) as conn:
        conn.execute(sa.text("SELECT set_config('app.all_tenants', 'on', true)"))
        rows = conn.execute(sa.text(
            "SELECT st.text_hash, (SELECT count(*) FROM knowledge.text_chunks c WHERE c.text_hash = st.text_hash)"
            " FROM knowledge.documents d JOIN knowledge.document_snapshots s ON s.document_id = d.id"
            " JOIN knowledge.snapshot_texts st ON st.snapshot_id = s.id"
            " WHERE d.site_domain = :s AND d.path = :p ORDER BY s.version"), {"s": site, "p": path}).all()
        conn.rollback()
    return {r[0]: int(r[1]) for r in rows}


def _urls(deps, query: str, site: str) -> list[str]:
    return [hit["url"] for hit in search(deps, query, site_domain=site, limit=5)["results"]]


def test_a_changed_page_drops_its_earlier_versions_chunks_unless_another_tenant_still_has_that_text(deps):
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(_site())
        for tenant in ("one.test", "two.test"):
            crawl(deps, new_request(site.url + "/", site_domain=tenant))
        before = deps.search_index.counts()["chunks"]
        ((old, old_chunks),) = _chunks_of(deps, "/tides", "one.test").items()
        assert old_chunks > 0 and _chunks_of(deps, "/tides", "two.test") == {old: old_chunks}

        # The page changes; only the first tenant crawls again. The second tenant's page still has the
        # old text (a text is shared by every tenant that has it), so its chunks stay.
        pages["/tides"] = _article("Tides", "Spring tides come with the new and the full moon and flood the quay")
        crawl(deps, new_request(site.url + "/", site_domain="one.test"))
        texts = _chunks_of(deps, "/tides", "one.test")
        (new,) = set(texts) - {old}
        assert texts[old] == old_chunks and texts[new] > 0
        assert site.url + "/tides" in _urls(deps, "ocean harbour fills", "two.test")

        # Once no page of any tenant has it, the earlier text's chunks are gone: `gleaner info` counts
        # only the chunks search answers from.
        crawl(deps, new_request(site.url + "/", site_domain="two.test"))
    assert _chunks_of(deps, "/tides", "two.test") == {old: 0, new: texts[new]}
    assert deps.search_index.counts()["chunks"] == before - old_chunks + texts[new]
    for tenant in ("one.test", "two.test"):
        assert site.url + "/tides" in _urls(deps, "spring tides flood the quay", tenant)
        assert site.url + "/lamps" in _urls(deps, "lighthouse lamp lens", tenant)


def test_an_older_stores_unused_chunks_are_deleted_by_the_migration(deps):
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(_site())
        crawl(deps, new_request(site.url + "/", site_domain="old.test"))
        ((old, old_chunks),) = _chunks_of(deps, "/lamps", "old.test").items()
        pages["/lamps"] = _article("Lamps", "An oil lamp needs its wick trimmed before dusk")
        crawl(deps, new_request(site.url + "/", site_domain="old.test"))
    assert _chunks_of(deps, "/lamps", "old.test")[old] == 0
    # As a store before 0052 kept them: the earlier version's chunks, which nothing searches by.
    with deps.engine.connect().execution_options(**{db.ADMIN_OPTION: True}) as conn:
        conn.execute(sa.text("SELECT set_config('app.all_tenants', 'on', false)"))
        cfg = db.alembic_config(deps.engine)
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0051")
        conn.execute(sa.text(
            "INSERT INTO knowledge.text_chunks (text_hash, ordinal, chunk_start, chunk_end, heading, tsv)"
            " SELECT :h, g, 0, 1, '', to_tsvector('english', 'lamp') FROM generate_series(0, :n - 1) g"),
            {"h": old, "n": old_chunks})
        conn.commit()
    assert _chunks_of(deps, "/lamps", "old.test")[old] == old_chunks
    db.upgrade(deps.engine)
    assert _chunks_of(deps, "/lamps", "old.test")[old] == 0
    assert site.url + "/lamps" in _urls(deps, "oil lamp wick trimmed", "old.test")
