"""The webhook body, parsed without a database: walks, batches, and every rejection reason."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import pytest

from gleaner.serving.web import BodyRefused, read_body
from gleaner.serving.webhook import Batch, MalformedRequest, Walk, parse_payload


def body(value) -> bytes:
    return json.dumps(value).encode()


def test_an_empty_body_or_empty_object_is_a_walk():
    assert parse_payload(b"") == Walk()
    assert parse_payload(b"  \n") == Walk()
    assert parse_payload(b"{}") == Walk()
    assert parse_payload(body({"full_reprocess": True})) == Walk(full_reprocess=True)


def test_a_batch_keeps_the_url_as_given_and_normalises_a_copy():
    batch = parse_payload(body({"articles": [{
        "url": "https://News.test/a/?utm_source=rss", "title": " A ", "workspace_id": "w1",
        "published_at": "2026-06-01T08:00:00+02:00", "summary": None, "feed_source": None}]}))
    assert isinstance(batch, Batch)
    (index, row), = batch.rows
    assert index == 0
    assert row.external_url == "https://News.test/a/?utm_source=rss"
    assert row.normalised_url == "https://news.test/a"
    assert row.title == "A"
    assert row.published_at == datetime(2026, 6, 1, 6, 0, tzinfo=UTC)


def test_each_bad_article_is_rejected_with_its_index_and_every_reason():
    batch = parse_payload(body({"articles": [
        {"url": "https://news.test/a", "title": "ok", "workspace_id": "w"},
        {"url": "https://news.test/b", "workspace_id": 7, "published_at": "2026-13-01", "colour": "red"},
    ]}))
    assert isinstance(batch, Batch)
    assert len(batch.rows) == 1
    (rejected,) = batch.rejected
    assert rejected["index"] == 1
    for fragment in ("missing field 'title'", "'workspace_id' must be a non-empty string", "RFC 3339",
                     "unknown field 'colour'"):
        assert fragment in rejected["reason"]


def test_an_impossible_date_is_rejected_even_in_rfc3339_shape():
    with pytest.raises(MalformedRequest) as exc:
        parse_payload(body({"articles": [{"url": "https://n.test/a", "title": "t", "workspace_id": "w",
                                          "published_at": "2026-02-30T00:00:00Z"}]}))
    assert "not a valid date-time" in json.dumps(exc.value.rejected)


def test_deeply_nested_json_is_malformed_not_a_crash():
    with pytest.raises(MalformedRequest):
        parse_payload(b"[" * 100_000 + b"]" * 100_000)


def test_full_reprocess_cannot_ride_along_with_articles():
    with pytest.raises(MalformedRequest, match="walk option"):
        parse_payload(body({"articles": [], "full_reprocess": True}))


def environ(data: bytes, length: str | None, terminated: bool = False) -> dict:
    env = {"wsgi.input": io.BytesIO(data), "wsgi.input_terminated": terminated}
    if length is not None:
        env["CONTENT_LENGTH"] = length
    return env


def test_a_body_is_read_only_as_declared_and_never_past_the_cap():
    env = environ(b"x" * 100, "200")
    with pytest.raises(BodyRefused) as refused:
        read_body(env, 50)
    assert refused.value.status == 413 and env["wsgi.input"].tell() == 0
    assert read_body(environ(b"abcdef", "3"), 50) == b"abc"
    env = environ(b"x" * 100, None, terminated=True)  # chunked, de-chunked by the server
    with pytest.raises(BodyRefused) as refused:
        read_body(env, 50)
    assert refused.value.status == 413 and env["wsgi.input"].tell() == 51


def test_no_content_length_and_no_chunked_body_means_an_empty_body_and_nothing_is_read():
    env = environ(b"abc", None)
    assert read_body(env, 50) == b"" and env["wsgi.input"].tell() == 0


@pytest.mark.parametrize(("length", "status"), [("-1", 400), ("1e3", 400), (" 5", 400), ("٣", 400),
                                                ("10", 400)])
def test_a_negative_or_malformed_content_length_is_refused(length, status):
    with pytest.raises(BodyRefused) as refused:
        read_body(environ(b"abc", length), 50)
    assert refused.value.status == status


@pytest.mark.parametrize("raw", [b'{"articles": [{"url": "https://n.test/a", "title": "\\ud800"}]}',
                                 b'{"articles": [{"url": "https://n.test/a", "title": "\\u0000"}]}',
                                 b'{"\\udfff": 1}', b'{"articles": "\xff\xfe"}'])
def test_text_that_is_not_valid_unicode_or_holds_a_nul_makes_the_whole_body_malformed(raw):
    with pytest.raises(MalformedRequest):
        parse_payload(raw)
