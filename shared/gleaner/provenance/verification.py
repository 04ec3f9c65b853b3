"""Deciding a citation's state from stored facts alone: verify against its own bytes, drift against today's.

``verify`` needs only what a third party can hold: the canonical text's bytes, the
citation (text hash, byte offsets, quote) and which snapshot links which text.
It never re-canonicalises: the bytes either hash to the named text hash and hold
the quote at the named offsets, or they do not.

``drift`` compares a verified citation with the document as it is now.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gleaner.provenance.citations import Citation, check_slice, find
from gleaner.provenance.quotes import quote_refusal


class VerifyState(StrEnum):
    VERIFIED = "verified"  # the stored bytes hash to the text hash and hold the quote at the offsets
    REJECTED = "rejected"  # the citation is wrong: its quote, offsets or binding do not match the bytes
    UNVERIFIABLE = "unverifiable"  # the bytes to check against are gone (erased, missing, corrupt)


class DriftState(StrEnum):
    HOLDS = "holds"  # the current version holds the quote at the same offsets
    CHANGED = "changed"  # the current version holds the quote at other offsets
    DRIFTED = "drifted"  # the page is there but no longer holds the quote
    GONE = "gone"  # the page is gone (erased, deleted, 404/410, failed, superseded, stale)
    UNKNOWN = "unknown"  # cannot say (the citation does not verify, the current version is not ingested)


@dataclass(frozen=True, slots=True)
class CitedSpan:
    """A stored citation: what it claims."""

    citation_id: str
    site_domain: str
    document_id: str
    snapshot_id: str | None
    version: int
    text_hash: str | None
    start: int
    end: int
    quote: str | None
    erased: bool = False

    def to_dict(self) -> dict[str, object]:
        return {"citation_id": self.citation_id, "document_id": self.document_id, "snapshot_id": self.snapshot_id,
                "version": self.version, "text_hash": self.text_hash, "start": self.start, "end": self.end,
                "quote": self.quote}


@dataclass(frozen=True, slots=True)
class SnapshotLink:
    """What the store says about the cited snapshot: its document and the text ingest made of it."""

    document_id: str
    text_hash: str | None


@dataclass(frozen=True, slots=True)
class CurrentText:
    snapshot_id: str
    version: int
    text_hash: str
    body: bytes


@dataclass(frozen=True, slots=True)
class DocumentNow:
    deleted: bool
    status: str
    last_fetch_status: int | None


@dataclass(frozen=True, slots=True)
class Verdict:
    state: VerifyState
    reason: str


def verify(cited: CitedSpan, link: SnapshotLink | None, body: bytes | None) -> Verdict:
    if cited.erased or cited.quote is None or cited.text_hash is None:
        return Verdict(VerifyState.UNVERIFIABLE, "erased")
    refusal = quote_refusal(cited.quote)
    if refusal is not None:
        return Verdict(VerifyState.REJECTED, str(refusal))
    if link is None:
        return Verdict(VerifyState.UNVERIFIABLE, "snapshot-missing")
    if link.document_id != cited.document_id or (link.text_hash is not None and link.text_hash != cited.text_hash):
        return Verdict(VerifyState.REJECTED, "inconsistent")
    if body is None:
        return Verdict(VerifyState.UNVERIFIABLE, "bytes-missing")
    check = check_slice(body, cited.text_hash, cited.start, cited.end, cited.quote)
    if not check.intact:
        return Verdict(VerifyState.UNVERIFIABLE, "bytes-corrupt")
    if not check.holds:
        return Verdict(VerifyState.REJECTED, "not-verbatim")
    return Verdict(VerifyState.VERIFIED, "")


GONE_STATUSES = frozenset({"failed", "superseded", "stale"})


@dataclass(frozen=True, slots=True)
class Drift:
    state: DriftState
    reason: str
    current: dict[str, object] | None = None  # version, snapshot_id, text_hash, start, end when it holds


def drift(cited: CitedSpan, verdict: Verdict, now: DocumentNow | None, current: CurrentText | None) -> Drift:
    if verdict.state is not VerifyState.VERIFIED:
        return Drift(DriftState.UNKNOWN, f"the citation is {verdict.state}" + (f" ({verdict.reason})"
                                                                                if verdict.reason else ""))
    assert cited.quote is not None
    if now is None or now.deleted:
        return Drift(DriftState.GONE, "the document was deleted")
    if now.last_fetch_status in (404, 410):
        return Drift(DriftState.GONE, f"the page answered {now.last_fetch_status}")
    if now.status in GONE_STATUSES:
        return Drift(DriftState.GONE, f"the document is {now.status}")
    if current is None:
        return Drift(DriftState.UNKNOWN, "the current version has no canonical text yet")
    span = {"version": current.version, "snapshot_id": current.snapshot_id, "text_hash": current.text_hash}
    if check_slice(current.body, current.text_hash, cited.start, cited.end, cited.quote).holds:
        return Drift(DriftState.HOLDS, "", {**span, "start": cited.start, "end": cited.end})
    found = find(current.body.decode("utf-8"), cited.quote)
    if isinstance(found, Citation):
        return Drift(DriftState.CHANGED, "the quote moved", {**span, "start": found.start, "end": found.end})
    return Drift(DriftState.DRIFTED, "the current version does not hold the quote")
