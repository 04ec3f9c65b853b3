"""The extraction processes start with trafilatura's justext fallback built; what it extracts is unchanged."""

from __future__ import annotations

from gleaner.extract.html import extract_html
from gleaner.extract.pool import ExtractPool

# Too little for trafilatura's own extractor: it falls back to justext, which needs the stoplist.
FALLS_BACK = "<html><body><div>Short words here and there, and the weather was fine.</div></body></html>"
ARTICLE = ("<html><head><title>T</title></head><body><nav><a href='/'>Home</a></nav><article><h1>Heading</h1>"
           + "".join(f"<p>Paragraph {i} says something about rivers, bridges and the towns between them.</p>"
                     for i in range(8)) + "</article></body></html>")


def stoplist_kind() -> str:
    from trafilatura import external

    return type(external.JT_STOPLIST).__name__


def test_workers_start_with_the_justext_stoplist_built_once_as_a_set():
    pool = ExtractPool(workers=2)
    try:
        kinds = {pool.call(stoplist_kind).result(timeout=120) for _ in range(4)}
        page = pool.call(extract_html, FALLS_BACK, "http://example.test/").result(timeout=120)
    finally:
        pool.close()
    assert kinds == {"frozenset"}
    assert "weather was fine" in page.content_md


def test_warming_changes_nothing_that_is_extracted():
    before = [extract_html(html, "http://example.test/") for html in (FALLS_BACK, ARTICLE)]
    from gleaner.extract.warm import warm_justext_fallback

    assert warm_justext_fallback()
    assert stoplist_kind() == "frozenset"
    after = [extract_html(html, "http://example.test/") for html in (FALLS_BACK, ARTICLE)]
    assert after == before
    assert "weather was fine" in after[0].content_md and "Paragraph 7" in after[1].content_md
