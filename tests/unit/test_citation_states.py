"""A citation's verify and drift states, decided from stored facts alone."""

from __future__ import annotations

from gleaner.provenance.canonical import canonicalise
from gleaner.provenance.citations import Citation, find
from gleaner.provenance.verification import (
    CitedSpan,
    CurrentText,
    DocumentNow,
    DriftState,
    SnapshotLink,
    VerifyState,
    drift,
    verify,
)

V1 = canonicalise(b"# News\n\nThe board approved the new budget on Monday.\n")
SHIFTED = canonicalise(b"# News\n\nUpdate: corrected.\n\nThe board approved the new budget on Monday.\n")
CHANGED = canonicalise(b"# News\n\nThe board rejected the budget on Monday.\n")


def _cited() -> CitedSpan:
    found = find(V1.text.decode(), "approved the new budget")
    assert isinstance(found, Citation)
    return CitedSpan("c1", "s.test", "d1", "snap1", 1, V1.text_hash, found.start, found.end, found.text)


def test_a_citation_verifies_against_its_own_bytes_and_is_rejected_when_they_disagree():
    cited = _cited()
    link = SnapshotLink("d1", V1.text_hash)
    assert verify(cited, link, V1.text).state is VerifyState.VERIFIED
    from dataclasses import replace

    assert verify(replace(cited, start=cited.start + 1), link, V1.text).state is VerifyState.REJECTED
    assert verify(replace(cited, quote="approved the old budget"), link, V1.text).state is VerifyState.REJECTED
    assert verify(cited, SnapshotLink("other", V1.text_hash), V1.text).state is VerifyState.REJECTED
    assert verify(cited, link, None).state is VerifyState.UNVERIFIABLE
    assert verify(cited, link, V1.text + b"tampered").state is VerifyState.UNVERIFIABLE
    assert verify(replace(cited, quote=None, erased=True), link, V1.text).state is VerifyState.UNVERIFIABLE


def test_drift_follows_the_page_through_shift_change_and_removal():
    cited = _cited()
    ok = verify(cited, SnapshotLink("d1", V1.text_hash), V1.text)
    live = DocumentNow(False, "active", 200)

    def now(text):
        return CurrentText("snap", 2, text.text_hash, text.text)

    same = drift(cited, ok, live, now(V1))
    assert same.state is DriftState.HOLDS and same.current["start"] == cited.start
    shifted = drift(cited, ok, live, now(SHIFTED))
    assert shifted.state is DriftState.CHANGED
    assert SHIFTED.text[shifted.current["start"]:shifted.current["end"]] == cited.quote.encode()
    assert shifted.current["start"] != cited.start
    assert drift(cited, ok, live, now(CHANGED)).state is DriftState.DRIFTED
    assert drift(cited, ok, DocumentNow(False, "active", 404), now(V1)).state is DriftState.GONE
    assert drift(cited, ok, DocumentNow(True, "active", 200), None).state is DriftState.GONE
    assert drift(cited, ok, live, None).state is DriftState.UNKNOWN
    rejected = verify(cited, SnapshotLink("d1", V1.text_hash), CHANGED.text)
    assert drift(cited, rejected, live, now(V1)).state is DriftState.UNKNOWN
