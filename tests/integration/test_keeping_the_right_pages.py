"""Keeping the right pages of real-shaped sites: no silent drops, documentation generators understood.

Loopback sites shaped like the ones that lost pages: near-empty section index pages over pages of
real prose, a book whose table of contents is drawn by a script (with a ``<noscript><iframe>``
fallback) and whose chapters chain by rel next / prev, and a print-all page repeating the chapters.
"""

from __future__ import annotations

import random

import sqlalchemy as sa

from gleaner.backoffice.wsgi import BackofficeApp
from gleaner.demosite.testsite import Page, TestSite
from gleaner.operator.review import review_list
from gleaner.operator.rules import add_rule
from gleaner.operator.runwarnings import excluded_warning, nothing_kept_warning
from gleaner.retrieval.index import remove_documents
from gleaner.retrieval.ranking import search
from gleaner.runtime.runner import crawl, new_request
from gleaner.store.backends import db
from tests.backoffice.conftest import call

_WORDS = ("river", "harbour", "lantern", "orchard", "granite", "compass", "meadow", "falcon", "copper", "willow",
          "thunder", "saddle", "timber", "canyon", "marble", "beacon", "glacier", "prairie", "anchor", "ember")


def _prose(seed: str, paragraphs: int = 3) -> str:
    rng = random.Random(seed)
    return "".join("<p>" + " ".join(rng.choice(_WORDS) for _ in range(45)) + f" {seed}.</p>"
                   for _ in range(paragraphs))


def _page(title: str, body: str, *links: str, head: str = "") -> Page:
    anchors = "".join(f'<li><a href="{href}">{href.rsplit("/", 1)[-1] or href}</a></li>' for href in links)
    return Page(f"<html><head><title>{title}</title>{head}</head><body><main>{body}<ul>{anchors}</ul></main>"
                "</body></html>")


def _near_empty_sections() -> dict[str, Page]:
    """The newcomer's site: a home and three section indexes of 35 characters each over seven real pages."""
    short = "<p>Pick a page from the list below.</p>"  # 35 characters
    return {
        "/": _page("Home", short, "/guide/", "/docs/index.html", "/notes/"),
        "/guide/": _page("Guide", short, "/guide/start.html", "/guide/configure.html", "/guide/deploy.html"),
        "/guide/start.html": _page("Start", _prose("start")),
        "/guide/configure.html": _page("Configure", _prose("configure")),
        "/guide/deploy.html": _page("Deploy", _prose("deploy")),
        "/docs/index.html": _page("Docs", short, "/docs/install.html", "/docs/faq.html"),
        "/docs/install.html": _page("Install", _prose("install")),
        "/docs/faq.html": _page("FAQ", _prose("faq")),
        "/notes/": _page("Notes", short, "/notes/2024.html", "/notes/2025.html"),
        "/notes/2024.html": _page("2024", _prose("notes2024")),
        "/notes/2025.html": _page("2025", _prose("notes2025")),
    }


PROSE = ("/guide/start.html", "/guide/configure.html", "/guide/deploy.html", "/docs/install.html", "/docs/faq.html",
         "/notes/2024.html", "/notes/2025.html")


def _kept(deps, run_id: str) -> set[str]:
    """Paths the run fetched and keeps a version of."""
    with deps.engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT d.path FROM knowledge.crawl_page_decisions c JOIN knowledge.documents d ON d.id = c.document_id"
            " WHERE c.run_id = :r AND c.decision = 'include' AND c.fetch_outcome IN ('fetched', 'not-modified')"
            " AND d.current_snapshot_id IS NOT NULL"), {"r": run_id}).all()
    return {r[0] for r in rows}


def _decision(deps, run_id: str, path: str) -> tuple[str, str, dict]:
    with deps.engine.connect() as conn:
        row = conn.execute(sa.text(
            "SELECT c.decision::text, c.decision_source::text, c.decision_metadata"
            " FROM knowledge.crawl_page_decisions c JOIN knowledge.documents d ON d.id = c.document_id"
            " WHERE c.run_id = :r AND d.path = :p"), {"r": run_id, "p": path}).one()
    return row[0], row[1], dict(row[2] or {})


def test_near_empty_section_indexes_do_not_drop_the_real_pages_under_them(deps):
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(_near_empty_sections())
        summary = crawl(deps, new_request(site.url + "/", site_domain="newcomer.test"))

    assert summary["status"] == "finished"
    assert set(PROSE) <= _kept(deps, summary["run_id"])  # 7 of 7, no operator action
    # The near-empty index pages are judged on their own text, and only they are left out.
    assert _decision(deps, summary["run_id"], "/docs/index.html")[0] == "exclude"
    assert summary["warnings"] == []


def test_a_section_whose_sampled_pages_are_all_near_empty_is_still_excluded(deps):
    short = "<p>Nothing to see here yet.</p>"
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update({
            "/": _page("Home", _prose("home"), "/stubs/", "/real.html"),
            "/stubs/": _page("Stubs", short, *(f"/stubs/{i}.html" for i in range(8))),
            **{f"/stubs/{i}.html": _page(f"Stub {i}", short) for i in range(8)},
            "/real.html": _page("Real", _prose("real")),
        })
        summary = crawl(deps, new_request(site.url + "/", site_domain="stubs.test"))

    kept = _kept(deps, summary["run_id"])
    assert {"/", "/real.html"} <= kept
    assert not any(p.startswith("/stubs/") for p in kept)
    # Four of the section's pages were read as samples before its verdict stood for the other five.
    with deps.engine.connect() as conn:
        sampled = conn.execute(sa.text(
            "SELECT count(*) FROM knowledge.crawl_page_decisions c JOIN knowledge.documents d ON d.id = c.document_id"
            " WHERE c.run_id = :r AND d.path LIKE '/stubs%' AND c.sample_uri IS NOT NULL"),
            {"r": summary["run_id"]}).scalar()
    assert sampled == 4
    _decision_, _source, metadata = _decision(deps, summary["run_id"], "/stubs/7.html")
    assert _decision_ == "exclude" and metadata["content_kind"] == "thin"


def test_an_include_rule_forces_in_a_page_the_decider_excluded(deps):
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update({
            "/": _page("Home", _prose("home"), "/contact/"),
            "/contact/": _page("Contact", "<p>Write to us: hello@example.org</p>"),
        })
        first = crawl(deps, new_request(site.url + "/", site_domain="forced.test"))
        assert "/contact" not in _kept(deps, first["run_id"])
        assert [(i.path, i.decision) for i in review_list(deps, "forced.test")] == [("/contact", "exclude")]
        assert "near-empty" in (review_list(deps, "forced.test")[0].reason or "")

        _rule, applied = add_rule(deps, "forced.test", "/contact*", "include", "the address matters")
        assert len(applied.unskipped) == 1  # the decider's skip is lifted at once
        second = crawl(deps, new_request(site.url + "/", site_domain="forced.test"))

    assert "/contact" in _kept(deps, second["run_id"])
    decision, source, metadata = _decision(deps, second["run_id"], "/contact")
    assert (decision, source, metadata["content_kind"]) == ("include", "operator", "forced")
    assert review_list(deps, "forced.test") == []


def test_keep_this_in_the_review_queue_brings_an_excluded_page_back(deps):
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update({
            "/": _page("Home", _prose("home"), "/hours/"),
            "/hours/": _page("Hours", "<p>Open 9 to 5, Monday to Friday.</p>"),
        })
        crawl(deps, new_request(site.url + "/", site_domain="keep.test"))
        app = BackofficeApp(deps)
        queue = call(app, "GET", "/ui/sites/keep.test/review")
        assert queue.status == 200 and b"keep this" in queue.body and b"near-empty" in queue.body
        kept = call(app, "POST", "/ui/sites/keep.test/review",
                    form=f"url={site.url}/hours&decision=include".encode())
        assert kept.status == 303
        again = crawl(deps, new_request(site.url + "/", site_domain="keep.test"))

    assert "/hours" in _kept(deps, again["run_id"])


def test_a_run_that_excluded_most_of_what_it_found_says_so_everywhere(deps):
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=60) as site:
        tags = [f"/tags/t{i}" for i in range(9)]
        pages.update({"/": _page("Home", _prose("home"), *tags), **{t: _page(t, _prose(t)) for t in tags}})
        summary = crawl(deps, new_request(site.url + "/", site_domain="mostly.test"))

    assert summary["discovered"] == 10 and summary["excluded"] == 9
    assert summary["warnings"] == [excluded_warning("mostly.test", 10, 9)]
    assert "excluded 9 of 10" in summary["warnings"][0]
    with deps.engine.connect() as conn:
        event = conn.execute(sa.text("SELECT summary FROM knowledge.document_events WHERE run_id = :r"
                                     " AND type::text LIKE 'run.%'"), {"r": summary["run_id"]}).scalar()
    assert event["warnings"] == summary["warnings"]  # the run event carries the same words
    page = call(BackofficeApp(deps), "GET", f"/ui/runs/{summary['run_id']}")
    assert page.status == 200 and b"excluded 9 of 10 pages discovered" in page.body


def test_a_run_that_kept_none_of_its_pages_says_so_though_most_were_not_excluded(deps):
    # A home page of links only, whose links are broken: one page excluded, three failed, none kept.
    pages = {"/": _page("Home", "", "/a.html", "/b.html", "/c.html")}
    with TestSite(pages, max_seconds=60) as site:
        summary = crawl(deps, new_request(site.url + "/", site_domain="nothing.test"))

    assert summary["status"] == "finished" and summary["fetched"] == 0 and summary["not_modified"] == 0
    assert summary["discovered"] == 4 and summary["excluded"] < 4 * 0.8
    assert summary["warnings"] == [nothing_kept_warning(summary["run_id"], "finished", 4, 0)]
    assert "kept none of the 4 pages discovered" in summary["warnings"][0]
    with deps.engine.connect() as conn:
        event = conn.execute(sa.text("SELECT summary FROM knowledge.document_events WHERE run_id = :r"
                                     " AND type::text LIKE 'run.%'"), {"r": summary["run_id"]}).scalar()
    assert event["warnings"] == summary["warnings"]  # the run event carries the same words


def _book(chapters: int, *, with_print: bool = False) -> dict[str, Page]:
    """An mdBook-shaped book: the toc drawn by a script (an iframe for readers without one), chapters chained."""
    def chapter(n: int) -> Page:
        prev = f'<link rel="prev" href="ch{n - 1:02}.html">' if n > 1 else ""
        nxt = (f'<a rel="next prefetch" href="ch{n + 1:02}.html" class="nav-chapters next">next</a>'
               if n < chapters else "")
        nav = ('<nav id="sidebar"><noscript><iframe class="sidebar-iframe-outer" src="toc.html"></iframe></noscript>'
               '</nav><script src="toc.js"></script>')
        return Page(f"<html><head><title>Chapter {n}</title>{prev}</head><body>{nav}<main><h1>Chapter {n}</h1>"
                    f"{_prose(f'chapter{n}', 6)}</main>{nxt}<a href='print.html'>print</a></body></html>")

    pages = {f"/book/ch{n:02}.html": chapter(n) for n in range(1, chapters + 1)}
    pages["/book/"] = Page(pages["/book/ch01.html"].body)  # mdBook's index.html is its first chapter
    # The toc names only the book's parts: the chapters of a part are reached through the chain.
    pages["/book/toc.html"] = _page("Contents", "", "ch01.html")
    pages["/book/toc.js"] = Page("document.write('<ol></ol>')", content_type="application/javascript")
    if with_print:
        pages["/book/print.html"] = Page("<html><head><title>Print</title></head><body><main>" + "".join(
            f"<h1>Chapter {n}</h1>{_prose(f'chapter{n}', 6)}" for n in range(1, chapters + 1))
            + "</main></body></html>")
    return pages


def test_a_page_an_older_rule_took_for_an_aggregate_is_judged_again_and_found_by_search(deps):
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(_book(12, with_print=True))
        crawl(deps, new_request(site.url + "/book/", site_domain="again.test"))
        with deps.engine.begin() as conn:  # what the rule before this one did to a chapter
            chapter = conn.execute(sa.text("UPDATE knowledge.documents SET is_aggregate = true"
                                           " WHERE site_domain = 'again.test' AND path = '/book/ch05.html'"
                                           " RETURNING CAST(id AS text)")).scalar_one()
            remove_documents(conn, [chapter])
        assert site.url + "/book/ch05.html" not in _hits(deps, "chapter5", "again.test")
        pages["/book/ch03.html"] = Page(pages["/book/ch03.html"].body.replace("</main>", "<p>Revised.</p></main>"))
        crawl(deps, new_request(site.url + "/book/", site_domain="again.test"))  # one changed page: an ingest

    with deps.engine.connect() as conn:
        flagged = conn.execute(sa.text("SELECT path FROM knowledge.documents WHERE site_domain = 'again.test'"
                                       " AND is_aggregate")).scalars().all()
    assert flagged == ["/book/print.html"]
    assert site.url + "/book/ch05.html" in _hits(deps, "chapter5", "again.test")


def _hits(deps, query: str, site_domain: str) -> list[str]:
    return [hit["url"] for hit in search(deps, query, site_domain=site_domain)["results"]]

def test_a_book_chained_by_rel_next_is_read_whole_at_the_default_depth(deps):
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(_book(14))
        summary = crawl(deps, new_request(site.url + "/book/", site_domain="book.test"))

    kept = _kept(deps, summary["run_id"])
    assert {f"/book/ch{n:02}.html" for n in range(1, 15)} <= kept  # 14 of 14 chapters
    assert site.requested("/book/toc.html") == 1  # found through the <noscript><iframe>


def test_a_print_all_page_is_kept_marked_aggregate_and_never_a_search_hit(deps):
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(_book(12, with_print=True))
        summary = crawl(deps, new_request(site.url + "/book/", site_domain="print.test"))

    assert "/book/print.html" in _kept(deps, summary["run_id"])
    assert _decision(deps, summary["run_id"], "/book/print.html")[2]["content_kind"] == "aggregate"
    with deps.engine.connect() as conn:
        flagged = conn.execute(sa.text("SELECT path FROM knowledge.documents WHERE site_domain = 'print.test'"
                                       " AND is_aggregate")).scalars().all()
    assert flagged == ["/book/print.html"]  # its chapters are not
    with deps.engine.connect().execution_options(**{db.ADMIN_OPTION: True}) as conn:
        chunks = dict(conn.execute(sa.text(
            "SELECT d.path = '/book/print.html', count(*) FROM knowledge.documents d"
            " JOIN knowledge.snapshot_texts st ON st.snapshot_id = d.current_snapshot_id"
            " JOIN knowledge.text_chunks c ON c.text_hash = st.text_hash"
            " WHERE d.site_domain = 'print.test' GROUP BY 1")).all())
        conn.rollback()
    # Chunked before it was found out, its copy of every chapter takes no candidate's place in search.
    assert chunks.get(True) is None and chunks[False] >= 12
    for n in (2, 7, 11):
        urls = [hit["url"] for hit in search(deps, f"chapter{n}", site_domain="print.test")["results"]]
        assert urls and site.url + "/book/print.html" not in urls
