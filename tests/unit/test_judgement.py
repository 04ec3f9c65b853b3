"""What a response means, decided from values alone (fetch/judgement.py)."""

from __future__ import annotations

from gleaner.fetch.judgement import (
    Readable,
    Refusal,
    judge_headers,
    judge_sniffed,
    judge_status,
    kind_of,
    robots_rules_from,
)
from gleaner.fetch.robots import RobotsState
from gleaner.fetch.types import ContentKind, FetchOutcome, FetchRequest, FetchResult

ROBOTS = "http://site.test/robots.txt"


def test_robots_answers_mean_rules_no_rules_or_nothing_this_run():
    fetched = robots_rules_from(FetchResult(ROBOTS, FetchOutcome.FETCHED, body=b"User-agent: *\nDisallow: /x\n"))
    assert fetched.state is RobotsState.RULES and not fetched.allows("http://site.test/x")
    assert robots_rules_from(FetchResult(ROBOTS, FetchOutcome.UNAVAILABLE, "HTTP 404", status=404)).state \
        is RobotsState.NONE
    busy = robots_rules_from(FetchResult(ROBOTS, FetchOutcome.UNAVAILABLE, "HTTP 503", status=503))
    assert busy.state is RobotsState.UNKNOWN and "RFC 9309" in busy.reason


def test_a_host_that_never_answered_is_named_as_the_cause_not_its_robots_txt():
    refused = FetchResult(ROBOTS, FetchOutcome.UNAVAILABLE, "network: connection refused by site.test:80")
    rules = robots_rules_from(refused)
    assert rules.state is RobotsState.UNKNOWN and rules.reason == refused.reason


def test_statuses_decide_before_the_body_is_read():
    plain, conditional = FetchRequest("http://site.test/a"), FetchRequest("http://site.test/a", etag='"e"')
    assert judge_status(plain, 200, robots=False) is None
    assert judge_status(conditional, 304, robots=False) == (FetchOutcome.NOT_MODIFIED, "304 not modified")
    assert judge_status(plain, 304, robots=False)[0] is FetchOutcome.UNAVAILABLE  # type: ignore[index]
    assert judge_status(plain, 451, robots=False) == (FetchOutcome.DENIED, "HTTP 451")
    assert kind_of("application/xhtml+xml", "http://site.test/a", (ContentKind.HTML,)) is ContentKind.HTML
    assert kind_of("application/pdf", "http://site.test/a", (ContentKind.HTML,)) is None


def test_headers_refuse_an_oversized_or_unwanted_body_before_it_is_read():
    page = FetchRequest("http://site.test/a")  # accepts HTML
    url = page.url
    assert judge_headers(page, {"content-length": "11"}, url, limit=10, robots=False) == Refusal(
        FetchOutcome.REFUSED_SIZE, "Content-Length 11 exceeds 10 bytes")
    pdf = judge_headers(page, {"content-type": "application/pdf"}, url, limit=10, robots=False)
    assert isinstance(pdf, Refusal) and pdf.outcome is FetchOutcome.REFUSED_CONTENT
    assert pdf.content_type == "application/pdf"
    assert judge_headers(page, {"content-type": "text/html; charset=latin-1", "content-length": "10"}, url,
                         limit=10, robots=False) == Readable("text/html", "latin-1", ContentKind.HTML)
    # robots.txt is read whatever it says it is
    assert judge_headers(page, {"content-type": "image/png"}, url, limit=10, robots=True).kind is ContentKind.ANY


def test_a_body_without_a_content_type_is_html_only_if_it_looks_like_html():
    page = FetchRequest("http://site.test/a")
    untyped = judge_headers(page, {}, page.url, limit=100, robots=False)
    assert untyped == Readable(None, None, None)  # the body decides
    assert judge_sniffed(b"  <!DOCTYPE html><title>t</title>") == Readable("text/html", None, ContentKind.HTML)
    assert judge_sniffed(b"%PDF-1.7") == Refusal(FetchOutcome.REFUSED_CONTENT,
                                                 "content type missing and the body is not HTML")
