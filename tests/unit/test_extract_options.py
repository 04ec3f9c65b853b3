"""trafilatura's options, built once per process, are exactly what its keyword arguments build per page."""

from __future__ import annotations

import trafilatura
from lxml import html as lxml_html
from trafilatura.settings import Extractor

from gleaner.extract.html import _options, extract_html

PAGE = ("<html><head><title>T</title></head><body><nav>menu</nav><article><h1>Heading</h1>"
        + "".join(f"<p>Paragraph {i} with <b>bold</b> words and a <a href='/x'>link</a> in it.</p>" for i in range(8))
        + "<table><tr><td>a</td><td>b</td></tr></table></article></body></html>")


def _by_keywords(url: str | None) -> Extractor:
    return Extractor(output_format="markdown", tables=True, formatting=True, links=False, comments=False,
                     with_metadata=False, dedup=False, url=url)


def test_every_field_equals_what_the_keywords_build() -> None:
    for url in ("https://example.org/a/b?q=1", "https://bücher.example/ü", None):
        built, expected = _options(url), _by_keywords(url)
        for name in Extractor.__slots__:
            assert getattr(built, name) == getattr(expected, name), name


def test_a_page_extracts_the_same_as_with_keyword_arguments() -> None:
    url = "https://example.org/article"
    expected = trafilatura.extract(lxml_html.fromstring(PAGE), url=url, output_format="markdown",
                                   include_tables=True, include_formatting=True, include_links=False,
                                   include_comments=False, with_metadata=False, deduplicate=False)
    assert expected and "Paragraph 7" in expected and "**bold**" in expected
    assert extract_html(PAGE, url).content_md == expected.strip() + "\n"


def test_pages_do_not_share_one_options_object() -> None:
    first, second = _options("https://example.org/1"), _options("https://example.org/2")
    assert first is not second and first.url == "https://example.org/1" and second.url == "https://example.org/2"
    assert first.date_params is not second.date_params


def test_a_process_running_past_midnight_reads_dates_as_of_today(monkeypatch) -> None:
    # The template is built once per process; the latest date a page may carry is the day of each page.
    import datetime as real

    import trafilatura.settings

    _options("https://example.org/first")  # the template, built "yesterday"

    class Tomorrow(real.datetime):
        @classmethod
        def now(cls, tz=None):
            return real.datetime.now(tz) + real.timedelta(days=1)

    monkeypatch.setattr(trafilatura.settings, "datetime", Tomorrow)
    built = _options("https://example.org/a").date_params
    assert built == _by_keywords("https://example.org/a").date_params
    assert built["max_date"] == (real.datetime.now().astimezone() + real.timedelta(days=1)).strftime("%Y-%m-%d")
