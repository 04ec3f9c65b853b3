"""A site's PDFs are crawled like its pages: fetched once, extracted with pypdf, versioned with their original."""

from __future__ import annotations

from gleaner.demosite.testsite import Page, TestSite
from gleaner.runtime.runner import crawl, new_request

from ..feed_site import article_html, make_pdf
from .db_helpers import rows

SITE = "docs-pdf.test"
FILLER = ("Every orchard is surveyed twice a year by two growers who walk each row, count the trees that "
          "came through the winter and note the ones that need replanting before the spring rains arrive.")
REPORTS = {f"/reports/annual-{year}.pdf": make_pdf(f"Annual report {year}",
                                                    [f"In {year} the cooperative planted {year - 1900} orchards.",
                                                     FILLER, FILLER.replace("twice", "three times")])
           for year in (2023, 2024, 2025)}


def pdf_site(pages: dict[str, Page]) -> None:
    links = "".join(f'<li><a href="{path}">{path}</a></li>' for path in REPORTS)
    pages["/"] = Page(article_html("Home", ["The cooperative publishes its reports below.", FILLER,
                                            "Each report covers one year of planting."])
                      .replace("</body>", f"<ul>{links}</ul><a href='/about'>About</a></body>"))
    pages["/about"] = Page(article_html("About", ["The cooperative was founded by growers in the valley.", FILLER,
                                                  "It has kept records of every orchard since then."]))
    pages["/robots.txt"] = Page("User-agent: *\nAllow: /\n", content_type="text/plain")
    for path, data in REPORTS.items():
        pages[path] = Page(data, content_type="application/pdf")


def test_a_section_of_pdfs_is_sampled_scraped_and_versioned_with_its_original(deps):
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pdf_site(pages)
        first = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        mark = len(site.log)
        second = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        asked = [r.path for r in site.log]
    assert first["status"] == "finished" and first["fetched"] == 5 and first["snapshots"]["new"] == 5
    decided = dict(rows(deps, "SELECT d.path, c.decision::text FROM knowledge.crawl_page_decisions c"
                              " JOIN knowledge.documents d ON d.id = c.document_id WHERE c.run_id = :r",
                        r=first["run_id"]))
    assert {decided[path] for path in REPORTS} == {"include"}  # the section of documents is not excluded
    versions = rows(deps, "SELECT d.path, d.kind::text, s.content_hash, s.processed_markdown_ref, s.original_ref,"
                          " s.extraction_metadata FROM knowledge.documents d"
                          " JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id"
                          " WHERE d.path LIKE '/reports/%' ORDER BY d.path")
    assert [v[0] for v in versions] == sorted(REPORTS)
    for path, kind, content_hash, content_ref, original_ref, metadata in versions:
        document_id = content_ref.split("/")[3]
        assert kind == "file"
        assert original_ref == f"domains/{SITE}/document-snapshots/{document_id}/{content_hash}/original.pdf"
        assert deps.blobs.get(original_ref) == REPORTS[path]
        year = path.split("-")[1].split(".")[0]
        assert f"the cooperative planted {int(year) - 1900} orchards" in deps.blobs.get(content_ref).decode()
        assert metadata["mime_type"] == "application/pdf" and metadata["extractor"].startswith("pypdf")
    assert all(asked[:mark].count(path) == 1 for path in REPORTS)  # fetched once in the first run
    assert all(asked[mark:].count(path) == 1 for path in REPORTS)  # and once, conditionally, in the recrawl
    assert second["snapshots"] == {"new": 0, "changed": 0, "unchanged": 5}


def test_an_unreadable_pdf_is_refused_not_failed_and_does_not_exclude_its_section(deps):
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pdf_site(pages)
        broken = next(iter(REPORTS))
        pages[broken] = Page(b"%PDF-1.4 this is not really a PDF", content_type="application/pdf")
        summary = crawl(deps, new_request(site.url + "/", site_domain=SITE))
    outcome = dict(rows(deps, "SELECT d.path, c.fetch_outcome::text FROM knowledge.crawl_page_decisions c"
                              " JOIN knowledge.documents d ON d.id = c.document_id WHERE c.run_id = :r",
                        r=summary["run_id"]))
    assert outcome[broken] == "refused-content"
    assert {outcome[p] for p in REPORTS if p != broken} == {"fetched"}
    assert summary["refused"] == 1 and summary["failed"] == 0
