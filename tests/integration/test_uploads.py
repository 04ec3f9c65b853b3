"""Uploads through ``POST /v1/ingest`` on a real ``gleaner serve``: real PDF, DOCX, HTML and Markdown files
become documents with versions, spans, search, citations and erasure, as a scraped page does."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from gleaner import tenancy
from gleaner.retrieval import search
from gleaner.serving.serve import WebhookServer
from gleaner.store.access.tokens import TokenStore
from gleaner.store.documents.erasure import erase_document

SITE = "acme.test"
OTHER = "rival.test"
REAL_PDF = Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf")  # a real manual, where the machine has it


def make_pdf(pages: list[str]) -> bytes:
    """A real multi-page PDF (fpdf2), one paragraph a page."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    return bytes(pdf.output())


def make_docx(title: str, paragraphs: list[str], table: list[list[str]] | None = None) -> bytes:
    """A real DOCX written with python-docx: a heading, paragraphs, a table."""
    import docx

    document = docx.Document()
    document.add_heading(title, level=1)
    for text in paragraphs:
        document.add_paragraph(text)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                grid.cell(r, c).text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


HTML = (b"<html><head><title>Returns policy</title></head><body><nav>Home | Shop</nav><main><article>"
        b"<h1>Returns policy</h1><p>Parcels may be returned within thirty days of delivery, postage paid by the "
        b"sender, provided the seal on the quarantine carton is unbroken.</p><p>Refunds reach the original card "
        b"within five working days of the warehouse receiving the carton.</p></article></main></body></html>")
MARKDOWN = (b"# Onboarding\n\nEvery new hire receives a walnut desk lamp and a copy of the field guide on the "
            b"first morning.\n\n## Badges\n\nBadges are printed by the front desk before nine.\n")


class Api:
    def __init__(self, server: WebhookServer) -> None:
        self.url = server.url

    def upload(self, name: str, data: bytes, token: str | None = None, **fields: str) -> httpx.Response:
        return httpx.post(self.url + "/v1/ingest", files={"file": (name, data)}, data=fields,
                          headers=_auth(token), timeout=60)

    def post(self, path: str, body: dict[str, Any], token: str | None = None) -> httpx.Response:
        return httpx.post(self.url + path, json=body, headers=_auth(token), timeout=60)

    def get(self, path: str, token: str | None = None, **params: Any) -> httpx.Response:
        return httpx.get(self.url + path, params=params, headers=_auth(token), timeout=30)

    def settled(self, job_id: str, token: str | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            job = self.get(f"/v1/ingest/{job_id}", token).json()
            if job["status"] in ("succeeded", "failed"):
                return job
            time.sleep(0.05)
        raise AssertionError(f"job {job_id} did not settle")

    def ingest(self, name: str, data: bytes, token: str | None = None, **fields: str) -> dict[str, Any]:
        answer = self.upload(name, data, token, **fields)
        assert answer.status_code == 202, answer.text
        return self.settled(answer.json()["job_id"], token)


def _auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


@pytest.fixture
def api(make_deps: Any) -> Iterator[tuple[Any, Api]]:
    deps = make_deps(webhook_secret="admin-secret")
    with WebhookServer(deps, port=0) as server:
        yield deps, Api(server)


def _rows(deps: Any, sql: str, **params: Any) -> list[Any]:
    with deps.engine.connect() as conn:
        return list(conn.execute(sa.text(sql), params).all())


def _hit(deps: Any, query: str, site: str = SITE) -> dict[str, Any] | None:
    with tenancy.scope(site):
        results = search(deps, query, site_domain=site, limit=5)["results"]
    return results[0] if results else None


def test_a_pdf_a_docx_html_and_markdown_become_searchable_citable_documents_with_their_originals(api):
    deps, client = api
    pdf = make_pdf(["The quarterly audit covers the lighthouse accounts of the northern harbour.",
                    "Page two lists the brass fittings ordered for the lighthouse in March.",
                    "Page three: the keeper's cottage roof was relined with slate."])
    docx = make_docx("Travel policy", ["Employees book rail travel through the intranet portal.",
                                       "Taxis need a receipt and a manager's note."],
                     [["Class", "Allowed"], ["Second", "always"], ["First", "over four hours"]])
    jobs = {
        "/reports/audit.pdf": client.ingest("audit.pdf", pdf, site=SITE, path="/reports/audit.pdf"),
        "/travel.docx": client.ingest("travel.docx", docx, site=SITE),
        "/returns.html": client.ingest("returns.html", HTML, site=SITE),
        "/onboarding.md": client.ingest("onboarding.md", MARKDOWN, site=SITE),
    }
    for path, job in jobs.items():
        assert job["status"] == "succeeded" and job["version"] == 1 and job["outcome"] == "new", job
        (doc,) = _rows(deps, "SELECT origin::text, kind::text, path, canonical_url, status::text, tags"
                             " FROM knowledge.documents WHERE id = :d", d=job["document_id"])
        assert doc[:5] == ("upload", "file", path, f"upload://{SITE}{path}", "active")
        (snapshot,) = _rows(deps, "SELECT s.original_ref, s.processed_markdown_ref FROM knowledge.document_snapshots s"
                                  " JOIN knowledge.documents d ON d.current_snapshot_id = s.id WHERE d.id = :d",
                            d=job["document_id"])
        assert snapshot[0] and deps.blobs.get(snapshot[0])  # the original, kept beside content.md
    content_ref = _rows(deps, "SELECT processed_markdown_ref FROM knowledge.document_snapshots WHERE document_id = :d",
                        d=jobs["/reports/audit.pdf"]["document_id"])[0][0]
    assert b"lighthouse" in deps.blobs.get(content_ref)
    for query, path in (("brass fittings lighthouse", "/reports/audit.pdf"), ("rail travel intranet", "/travel.docx"),
                        ("parcels returned thirty days", "/returns.html"), ("walnut desk lamp", "/onboarding.md")):
        hit = _hit(deps, query)
        assert hit is not None and hit["url"] == f"upload://{SITE}{path}", (query, hit)
        sliced = client.get(f"/v1/texts/{hit['text_hash']}", "admin-secret", start=hit["start"], end=hit["end"])
        assert sliced.status_code == 200 and sliced.content  # a verbatim, citable slice
    table = _rows(deps, "SELECT t.body FROM knowledge.canonical_texts t JOIN knowledge.snapshot_texts st"
                        " ON st.text_hash = t.text_hash JOIN knowledge.documents d"
                        " ON d.current_snapshot_id = st.snapshot_id WHERE d.id = :d",
                  d=jobs["/travel.docx"]["document_id"])[0][0]
    assert "# Travel policy" in table and "| First | over four hours |" in table
    events = _rows(deps, "SELECT type::text FROM knowledge.document_events WHERE document_id = :d",
                   d=jobs["/onboarding.md"]["document_id"])
    assert [e[0] for e in events] == ["document.new"]
    with tenancy.scope(SITE):
        cited = deps.provenance.cite(deps.provenance.document_at(f"upload://{SITE}/onboarding.md", SITE),
                                     "receives a walnut desk lamp")
    assert getattr(cited, "start", None) is not None


@pytest.mark.skipif(not REAL_PDF.exists(), reason="the real manual is not installed on this machine")
def test_a_real_manual_of_this_machine_is_kept_page_by_page(api):
    deps, client = api
    job = client.ingest(REAL_PDF.name, REAL_PDF.read_bytes(), site=SITE, path="/manuals/libtasn1.pdf")
    assert job["status"] == "succeeded", job
    hit = _hit(deps, "Abstract Syntax Notation One DER")
    assert hit is not None and hit["url"] == f"upload://{SITE}/manuals/libtasn1.pdf"


def test_the_same_bytes_again_write_nothing_and_new_bytes_at_the_path_are_the_next_version(api):
    deps, client = api
    first = client.ingest("onboarding.md", MARKDOWN, site=SITE)
    again = client.ingest("onboarding.md", MARKDOWN, site=SITE)
    assert (again["outcome"], again["version"], again["document_id"]) == ("unchanged", 1, first["document_id"])
    changed = client.ingest("onboarding.md", MARKDOWN.replace(b"walnut", b"copper"), site=SITE)
    assert (changed["outcome"], changed["version"], changed["document_id"]) == ("changed", 2, first["document_id"])
    events = [e[0] for e in _rows(deps, "SELECT type::text FROM knowledge.document_events WHERE document_id = :d"
                                        " ORDER BY occurred_at", d=first["document_id"])]
    assert events == ["document.new", "document.changed"]
    assert _hit(deps, "copper desk lamp")["version"] == 2


def test_a_file_past_its_ceiling_is_413_naming_the_limit_and_an_unreadable_one_is_422_and_nothing_is_written(api):
    deps, client = api
    big = client.upload("dump.md", b"# x\n" + b"a" * (20 * 1024 * 1024 + 1), site=SITE)
    assert big.status_code == 413 and big.json()["limit"] == 20 * 1024 * 1024 and "20 MB" in big.json()["error"]
    broken = client.upload("broken.pdf", b"%PDF-1.4\n1 0 obj garbage", site=SITE)
    assert broken.status_code == 422 and "PDF" in broken.json()["error"]
    not_docx = client.upload("notes.docx", b"plain words, not a zip", site=SITE)
    assert not_docx.status_code == 422 and "DOCX" in not_docx.json()["error"]
    unknown = client.upload("data.bin", b"\x00\x01", site=SITE)
    assert unknown.status_code == 422 and "format" in unknown.json()["error"]
    assert _rows(deps, "SELECT count(*) FROM knowledge.ingest_jobs")[0][0] == 0
    assert _rows(deps, "SELECT count(*) FROM knowledge.documents")[0][0] == 0
    assert deps.blobs.list("domains/") == []


def test_inline_text_and_a_url_are_uploads_too(api):
    deps, client = api
    answer = client.post("/v1/ingest", {"site": SITE, "text": "# FAQ\n\nThe kiosk opens at seven.\n",
                                        "format": "markdown", "path": "/faq.md"})
    assert answer.status_code == 202
    assert client.settled(answer.json()["job_id"])["version"] == 1
    bad = client.post("/v1/ingest", {"site": SITE, "text": "no format"})
    assert bad.status_code == 400
    from gleaner.demosite.testsite import Page, TestSite

    with TestSite({"/robots.txt": Page("", content_type="text/plain"),
                   "/guide": Page(HTML.decode(), content_type="text/html")}) as site:
        fetched = client.post("/v1/ingest", {"site": SITE, "url": site.url + "/guide", "path": "/guide.html"})
        assert fetched.status_code == 202, fetched.text
        job = client.settled(fetched.json()["job_id"])
    assert job["status"] == "succeeded" and _hit(deps, "parcels returned thirty days")["url"] == \
        f"upload://{SITE}/guide.html"


def test_a_site_token_uploads_into_its_own_site_only_and_reads_only_its_own_jobs(api):
    deps, client = api
    tokens = TokenStore(deps.engine)
    mine, theirs = tokens.add_site(SITE)["token"], tokens.add_site(OTHER)["token"]
    own = client.ingest("onboarding.md", MARKDOWN, token=mine)  # the token's site when none is named
    assert own["status"] == "succeeded" and own["site_domain"] == SITE
    elsewhere = client.upload("onboarding.md", MARKDOWN, token=mine, site=OTHER)
    assert elsewhere.status_code == 404
    assert client.post("/v1/ingest", {"site": OTHER, "text": "x", "format": "text", "path": "/x.txt"},
                       token=mine).status_code == 404
    assert client.get(f"/v1/ingest/{own['job_id']}", theirs).status_code == 404
    assert client.get(f"/v1/ingest/{own['job_id']}", mine).status_code == 200
    assert client.upload("onboarding.md", MARKDOWN, token="wrong-token", site=SITE).status_code == 401
    assert _rows(deps, "SELECT count(*) FROM knowledge.documents WHERE site_domain = :s", s=OTHER)[0][0] == 0


def test_an_erased_upload_loses_its_bodies_and_the_same_file_is_refused_after(api):
    deps, client = api
    job = client.ingest("onboarding.md", MARKDOWN, site=SITE)
    original = _rows(deps, "SELECT original_ref FROM knowledge.document_snapshots WHERE document_id = :d",
                     d=job["document_id"])[0][0]
    report = erase_document(deps.provenance, deps.blobs, deps.blocklist, job["document_id"], "request 7", "tester")
    assert report.versions_removed == 1 and not deps.blobs.exists(original)
    assert _hit(deps, "walnut desk lamp") is None
    again = client.ingest("onboarding.md", MARKDOWN, site=SITE)
    assert again["status"] == "failed" and "erased" in again["error"]
