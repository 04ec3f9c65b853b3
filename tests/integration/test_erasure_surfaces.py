"""After `erase`, nothing of the page is left: not in any blob, not in any text column of any table.

An HTML page and a PDF are crawled twice (two versions, fetch-once bodies, samples,
map artefacts, ledger rows, change events), the HTML page is folded into a composite
with another page (whose body then holds it), both are erased, and then the whole blob tree
and every text, JSON and byte column of the database are searched for the page's
distinctive words and its URL.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from fpdf import FPDF

from gleaner.cli.operating import drain_local
from gleaner.demosite.testsite import Page, TestSite
from gleaner.operator.composites import history
from gleaner.operator.routing import create_composite, list_composites
from gleaner.runtime.runner import crawl, new_request
from gleaner.store.documents.erasure import erase_document

SITE = "quokka.test"
HTML_PATH = "/people/zanzibar-quokka"
PDF_PATH = "/files/wallaby-dossier.pdf"
HTML_WORDS = "Zanzibar Quokka lives at 17 Marmalade Lane"
PDF_WORDS = "Wallaby Dossier account 4471 9920"
FILLER = ("The harbour committee met on Tuesday to discuss the ferry timetable, the repairs to the northern "
          "pier and the budget for dredging the old channel before the winter storms arrive.")


def _html(extra: str) -> str:
    return (f"<!doctype html><html><head><meta charset=utf-8><title>{HTML_WORDS}</title></head><body><main>"
            f"<article><h1>{HTML_WORDS}</h1><p>{HTML_WORDS}. {FILLER}</p><p>{FILLER} {extra}</p>"
            "</article></main></body></html>")


def _pdf(extra: str) -> bytes:
    pdf = FPDF()
    pdf.set_compression(False)  # the words stay legible in the PDF's bytes: the scan would see a kept original
    pdf.set_title(PDF_WORDS)
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    for line in (PDF_WORDS, FILLER, extra):
        pdf.multi_cell(0, 8, line, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def _index() -> str:
    # Generic anchors: the index is another document, whose own text the erasure does not touch.
    return ("<!doctype html><html><head><title>Harbour</title></head><body><main><h1>Harbour</h1>"
            f"<p>{FILLER}</p><ul><li><a href='{HTML_PATH}'>one</a></li><li><a href='{PDF_PATH}'>two</a></li>"
            "<li><a href='/keep'>three</a></li></ul></main></body></html>")


def _pages(extra: str) -> dict[str, Page]:
    return {"/": Page(_index()), HTML_PATH: Page(_html(extra)),
            PDF_PATH: Page(_pdf(extra), content_type="application/pdf"),
            "/keep": Page(_html("kept").replace("Zanzibar Quokka", "Another Person").replace("Marmalade", "Main"))}


def blob_hits(root: Path, needles: list[bytes]) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            hits += [f"{path.relative_to(root)}: {n!r}" for n in needles if n in data or n in str(path).encode()]
    return hits


def database_hits(engine: sa.Engine, needles: list[str]) -> list[str]:
    """Every text-like column of every table outside the system schemas, searched for each needle."""
    with engine.connect() as conn:
        columns = conn.execute(sa.text(
            "SELECT table_schema, table_name, column_name, data_type FROM information_schema.columns"
            " JOIN information_schema.tables USING (table_schema, table_name)"
            " WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')"
            " AND data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'bytea', 'ARRAY')"
        )).all()
        assert len(columns) > 50  # the scan really covers the schema
        hits = []
        for schema, table, column, kind in columns:
            # bytea as escaped text: ASCII stays readable, any other byte (sign bits, digests) is \ooo.
            value = (f'"{column}"::text' if kind != "bytea"
                     else f"encode(\"{column}\", 'escape')")
            for needle in needles:
                found = conn.execute(sa.text(
                    f'SELECT count(*) FROM "{schema}"."{table}" WHERE strpos(lower({value}), lower(:n)) > 0'),
                    {"n": needle}).scalar_one()
                if found:
                    hits.append(f"{schema}.{table}.{column}: {needle}")
    return hits


def test_erasure_leaves_no_trace_of_an_html_page_or_a_pdf_in_blobs_or_database(make_deps):
    # Change events are delivered to a subscriber (nobody listens: each delivery fails once and stops),
    # so the delivery bodies that name the page are in the scan too.
    deps = make_deps(notify_run_wait=0.0, notify_max_attempts=1, notify_timeout=1.0)
    deps.metadata.add_subscription("http://127.0.0.1:9/hook", SITE, [], "whsec_" + "A" * 32)
    # A daily digest holds the events as items until its day ends (gleaner.changes.digest).
    deps.metadata.add_subscription("json://127.0.0.1:9/hook", SITE, [], "whsec_" + "B" * 32, 86400)
    with TestSite(_pages("First edition."), max_seconds=120) as site:
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
        site.pages.update({k: v for k, v in _pages("Second edition.").items() if k != "/"})
        second = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        assert second["status"] in ("finished", "partial"), second
        urls = [site.url + HTML_PATH, site.url + PDF_PATH]
        # A composite folds the page in: its version's body and canonical text hold the page's words and URL.
        composite = create_composite(deps, SITE, "Harbour people", [site.url + HTML_PATH, site.url + "/keep"])
        drain_local(deps)  # the composite is ingested: its text, spans and chunks exist
        needles = [HTML_WORDS.split(" lives")[0], "Marmalade", PDF_WORDS, "zanzibar-quokka", "wallaby-dossier"]
        blob_root = Path(deps.settings.data_dir) / "blobs"
        # The crawl kept them where the scan looks (so the scan can see them).
        before = database_hits(deps.engine, needles)
        assert any(hit.startswith("knowledge.notify_deliveries.body") for hit in before), before
        assert any(hit.startswith("knowledge.notify_digest_items.body") for hit in before), before
        assert blob_hits(blob_root, [n.encode() for n in needles])
        for url in urls:
            document = deps.provenance.document_at(url, SITE)
            erase_document(deps.provenance, deps.blobs, deps.blocklist, document["id"], "request 7", "tester")

        assert blob_hits(blob_root, [n.encode() for n in needles]) == []
        assert database_hits(deps.engine, needles) == []
        # The composite lost the versions that held the page; it is stale and its history says why.
        (after,) = [c for c in list_composites(deps, SITE) if c.id == composite.id]
        assert (after.status, after.snapshot_id) == ("stale", None)
        assert "erased" in (history(deps, composite.id)[-1].note or "")
        # The page that was not erased is still whole.
        assert deps.provenance.document_at(site.url + "/keep", SITE)["current_snapshot_id"] is not None
