"""An answer kept for scrape comes back as the same result, body and redirects included; a spent budget is not kept."""

from gleaner.fetch.types import ContentKind, FetchOutcome, FetchResult
from gleaner.store.backends.localblobs import LocalBlobStore
from gleaner.store.ledger.fetchonce import Prefetched, kept, replay_for


def test_a_kept_answer_replays_as_the_result_the_site_gave(tmp_path):
    blobs = LocalBlobStore(tmp_path)
    result = FetchResult("http://a.test/old", FetchOutcome.FETCHED, final_url="http://a.test/new", status=200,
                         content_type="text/html", charset="utf-8", kind=ContentKind.HTML, body=b"<p>hi</p>",
                         etag='"e1"', last_modified="Tue, 14 Nov 2023 22:13:20 GMT", elapsed_ms=12, redirects=(301,))
    answer = kept(blobs, "a.test", "00000000-0000-0000-0000-000000000001", "abc", result, "map")
    assert answer is not None
    stored = Prefetched.from_dict(answer.to_dict())  # as it travels through the ledger's jsonb
    again = replay_for(blobs, stored.to_dict(), "http://a.test/old", "doc-1", has_snapshot=False)
    assert again is not None
    assert (again.outcome, again.body, again.final_url, again.redirects, again.etag, again.key) == (
        FetchOutcome.FETCHED, b"<p>hi</p>", "http://a.test/new", (301,), '"e1"', "doc-1")


def test_a_304_stands_only_for_a_page_with_a_current_snapshot_and_a_spent_budget_is_never_kept(tmp_path):
    blobs = LocalBlobStore(tmp_path)
    not_modified = kept(blobs, "a.test", "r", "p", FetchResult("http://a.test/", FetchOutcome.NOT_MODIFIED,
                                                                status=304), "map")
    assert not_modified is not None
    assert replay_for(blobs, not_modified.to_dict(), "http://a.test/", None, has_snapshot=False) is None
    assert replay_for(blobs, not_modified.to_dict(), "http://a.test/", None, has_snapshot=True) is not None
    assert kept(blobs, "a.test", "r", "p", FetchResult("http://a.test/", FetchOutcome.EXHAUSTED), "map") is None


def test_a_kept_refusal_by_the_address_policy_is_still_a_refusal_when_replayed(tmp_path):
    blobs = LocalBlobStore(tmp_path)
    for flags in ({"non_public_address": True}, {"url_refused": True}, {}):
        refused = FetchResult("http://a.test/x", FetchOutcome.UNAVAILABLE, "why", **flags)
        answer = kept(blobs, "a.test", "r", "p", refused, "sample")
        assert answer is not None
        again = replay_for(blobs, Prefetched.from_dict(answer.to_dict()).to_dict(), "http://a.test/x", None,
                           has_snapshot=False)
        assert again is not None and again.refused_by_policy is bool(flags)
