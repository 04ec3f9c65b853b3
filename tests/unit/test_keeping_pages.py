"""Pure parts of keeping the right pages: chained and framed links, section evidence, aggregate pages."""

from __future__ import annotations

from dataclasses import dataclass

from gleaner.decide.port import PageDecision, Verdict
from gleaner.discover.links import extract_links
from gleaner.operator.runwarnings import excluded_warning, nothing_kept_warning, run_warnings
from gleaner.retrieval.aggregates import find_aggregates, paragraphs
from gleaner.stages.sectionproof import confirm_exclusion, index_like, section_verdict


def test_rel_next_and_prev_are_chained_and_frames_are_links():
    html = ('<html><head><link rel="next" href="b.html"><link rel="stylesheet" href="s.css"></head><body>'
            '<nav><noscript><iframe src="toc.html"></iframe></noscript></nav><a rel="prev" href="a0.html">p</a>'
            '<a rel="next prefetch" href="b.html">n</a><frameset><frame src="f.html"></frameset>'
            '<a rel="nofollow next" href="secret.html">x</a></body></html>')
    page = extract_links(html, "http://x.test/book/a.html")
    assert page.chain == ("http://x.test/book/b.html", "http://x.test/book/a0.html")
    assert set(page.links) == {"http://x.test/book/b.html", "http://x.test/book/toc.html",
                               "http://x.test/book/a0.html", "http://x.test/book/f.html"}


@dataclass
class _Member:
    document_id: str
    path: str


@dataclass
class _Outcome:
    sample: _Member | None
    verdict: PageDecision


def _thin(member: _Member) -> _Outcome:
    return _Outcome(member, PageDecision(Verdict.EXCLUDE, "near-empty main text (35 chars)", 0.8, content_kind="thin"))


def test_an_excluded_sample_is_checked_on_leaf_pages_and_a_kept_one_makes_the_section_mixed():
    members = [_Member("1", "/docs/"), _Member("2", "/docs/api/"), _Member("3", "/docs/install.html")]
    read = list(confirm_exclusion(members, "1", lambda rest: _Outcome(rest[0], PageDecision(
        Verdict.INCLUDE if not index_like(rest[0].path) else Verdict.EXCLUDE, "r", 0.8))))
    assert [o.sample.path for o in read] == ["/docs/install.html"]  # a leaf page first; kept: enough said
    verdict = section_verdict("/docs", [("/docs/", _thin(members[0]).verdict), ("/docs/install.html", read[0].verdict)])
    assert verdict.decision == Verdict.INCLUDE and verdict.content_kind == "mixed_section"


def test_a_section_is_excluded_only_when_every_page_read_is_excluded():
    members = [_Member(str(i), f"/stubs/{i}.html") for i in range(10)]
    read = list(confirm_exclusion(members, "0", lambda rest: _thin(rest[0])))
    assert len(read) == 3
    verdict = section_verdict("/stubs", [(m.path, _thin(m).verdict) for m in members[:4]])
    assert verdict.decision == Verdict.EXCLUDE and "all 4 pages sampled" in verdict.reason


def _text(tag: str, n: int) -> str:
    return "\n\n".join(f"Paragraph {i} of {tag} says something long enough to be counted as prose here."
                       for i in range(n))


def test_a_print_all_page_is_an_aggregate_and_its_chapters_are_not():
    chapters = {f"ch{c}": _text(f"chapter {c}", 8) for c in range(6)}
    texts = {doc: paragraphs(text) for doc, text in chapters.items()}
    texts["print"] = paragraphs("\n\n".join(chapters.values()))
    texts["print-again"] = paragraphs("\n\n".join(chapters.values()))  # a second edition of everything
    found = find_aggregates(texts)
    assert set(found) == {"print", "print-again"} and found["print"].sources >= 3


def test_a_long_page_of_its_own_is_no_aggregate():
    texts = {"long": paragraphs(_text("the long page", 60)), **{f"p{i}": paragraphs(_text(f"page {i}", 5))
                                                                  for i in range(5)}}
    assert find_aggregates(texts) == {}


def test_api_pages_repeating_a_traits_docs_or_each_other_are_no_aggregates():
    """rustdoc's shape: every type implementing a trait repeats the trait's method docs, and the same type's
    page is published twice (std and core). Only the print-all page of the guide beside them is an aggregate."""
    trait = [f"Method {m} of the trait: what it returns, when it panics and an example of its use." for m in range(30)]
    texts: dict[str, set[bytes]] = {"trait": paragraphs("\n\n".join(trait))}
    texts.update({f"other{i}": paragraphs(_text(f"other page {i}", 4)) for i in range(60)})  # a large site
    for t in range(7):  # 15 pages hold the trait's docs: under a fifth of the site
        own = [f"Type {t} keeps its own state {i} and documents it at some length here." for i in range(8)]
        page = paragraphs("\n\n".join(own + trait))
        texts[f"std/type{t}"] = texts[f"core/type{t}"] = page
    chapters = {f"guide/ch{c}": _text(f"guide chapter {c}", 8) for c in range(6)}
    texts.update({doc: paragraphs(text) for doc, text in chapters.items()})
    texts["guide/print"] = paragraphs("\n\n".join(chapters.values()))
    assert set(find_aggregates(texts)) == {"guide/print"}


def test_a_page_and_its_twin_are_no_aggregates_of_each_other():
    page = _text("the page", 30).split("\n\n")
    texts = {"a": paragraphs("\n\n".join(page)), "b": paragraphs("\n\n".join(page))}  # one page, two paths
    texts.update({f"part{i}": paragraphs("\n\n".join(page[i * 3:i * 3 + 3])) for i in range(3)})  # quoting it
    assert find_aggregates(texts) == {}


def test_only_the_candidates_are_judged_and_every_text_is_a_source():
    chapters = {f"ch{c}": _text(f"chapter {c}", 8) for c in range(6)}
    texts = {doc: paragraphs(text) for doc, text in chapters.items()}
    texts["print"] = paragraphs("\n\n".join(chapters.values()))
    assert set(find_aggregates(texts, candidates={"print"})) == {"print"}
    assert find_aggregates(texts, candidates={"ch1"}) == {}


def test_the_warning_starts_at_eighty_percent_excluded():
    assert excluded_warning("s.test", 10, 7) is None
    assert excluded_warning("s.test", 10, 8) is not None and "8 of 10" in excluded_warning("s.test", 10, 8)
    assert excluded_warning("s.test", 0, 0) is None


def test_a_finished_run_that_kept_nothing_says_so_unless_the_excluded_warning_already_does():
    words = nothing_kept_warning("r1", "finished", 163, 0)
    assert words is not None and "kept none of the 163 pages" in words and "gleaner runs r1 --urls" in words
    assert run_warnings("s.test", "r1", "finished", 163, 122, 0) == [words]
    assert nothing_kept_warning("r1", "finished", 163, 1) is None  # one page kept
    assert nothing_kept_warning("r1", "scraping", 163, 0) is None  # not over yet
    assert nothing_kept_warning("r1", "finished", 0, 0) is None
    assert run_warnings("s.test", "r1", "partial", 10, 9, 0) == [excluded_warning("s.test", 10, 9)]
    assert run_warnings("s.test", "r1", "finished", 10, 1, 9) == []
