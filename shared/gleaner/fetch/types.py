"""Values the fetcher returns: one outcome per URL, exactly the statuses of DESIGN.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from gleaner.fetch.charset import decode_html, sniff


class FetchOutcome(StrEnum):
    """Every URL of a run ends with exactly one of these (DESIGN.md); the reason says why."""

    FETCHED = "fetched"
    NOT_MODIFIED = "not-modified"
    ROBOTS_DENIED = "robots-denied"
    ROBOTS_UNKNOWN = "robots-unknown"
    REFUSED_SIZE = "refused-size"
    REFUSED_CONTENT = "refused-content"
    REDIRECT_REFUSED = "redirect-refused"
    DENIED = "denied"
    UNAVAILABLE = "unavailable"
    EXHAUSTED = "exhausted"
    # Recorded by the scrape stage, never returned by the fetcher: fetched, but the body could not be
    # stored (the blob store failed); settled for the run, so the site is not asked for it again.
    STORE_FAILED = "store-failed"
    # Not the fetcher's: the page was fetched, but its content was erased and is refused (seed 004).
    REFUSED_ERASED = "refused-erased"

    @property
    def ok(self) -> bool:
        return self in (FetchOutcome.FETCHED, FetchOutcome.NOT_MODIFIED)

    @property
    def retryable(self) -> bool:
        """Transient: the next run (or walk) may succeed."""
        return self in (FetchOutcome.UNAVAILABLE, FetchOutcome.ROBOTS_UNKNOWN, FetchOutcome.EXHAUSTED)


# Refused by policy, not failed by the site (DESIGN.md "Document lifecycle": the summary's "refused").
REFUSED_OUTCOMES = frozenset({FetchOutcome.ROBOTS_DENIED, FetchOutcome.ROBOTS_UNKNOWN, FetchOutcome.REDIRECT_REFUSED,
                              FetchOutcome.REFUSED_SIZE, FetchOutcome.REFUSED_CONTENT, FetchOutcome.REFUSED_ERASED})
# Left by a limit or budget (the summary's "limited", with the URLs discovery found past the run's limit).
LIMITED_OUTCOMES = frozenset({FetchOutcome.EXHAUSTED})


class ContentKind(StrEnum):
    HTML = "html"
    XML = "xml"  # sitemaps
    FEED = "feed"
    PDF = "pdf"
    TEXT = "text"  # robots.txt
    ANY = "any"


@dataclass(frozen=True, slots=True)
class FetchRequest:
    url: str
    etag: str | None = None
    last_modified: str | None = None
    accept: tuple[ContentKind, ...] = (ContentKind.HTML,)
    key: str | None = None  # caller's id for the request (a document id), returned on the result


@dataclass(frozen=True, slots=True)
class FetchResult:
    url: str
    outcome: FetchOutcome
    reason: str = ""
    final_url: str | None = None
    status: int | None = None
    content_type: str | None = None
    charset: str | None = None
    kind: ContentKind | None = None
    body: bytes | None = None
    etag: str | None = None
    last_modified: str | None = None
    elapsed_ms: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    key: str | None = None
    wire_bytes: int | None = None  # bytes received on the wire (compressed), for the run's byte budget
    # The status of each redirect followed to get here, in order: (301, 308) means the page moved for good.
    redirects: tuple[int, ...] = ()
    # The address policy refused the host (outcome unavailable): permanent, unlike a timeout or a lookup.
    non_public_address: bool = False
    # The URL itself is not one Gleaner fetches (a scheme, credentials, a port): outcome unavailable too.
    url_refused: bool = False

    @property
    def refused_by_policy(self) -> bool:
        """Unavailable because Gleaner's own policy refused to ask, not because the site failed: the
        address policy's refusals travel as ``unavailable`` (DESIGN.md), the summary counts them refused."""
        return self.non_public_address or self.url_refused

    @property
    def ok(self) -> bool:
        return self.outcome is FetchOutcome.FETCHED

    def text(self) -> str:
        """The body decoded by the declared or sniffed charset (replacement on bad bytes)."""
        if self.body is None:
            return ""
        return decode_body(self.body, self.charset)


def sniff_charset(body: bytes, declared: str | None) -> str:
    """The body's encoding as the HTML standard sniffs it (fetch/charset.py): BOM, transport, meta, bytes."""
    return sniff(body, declared).encoding


def decode_body(body: bytes, charset: str | None) -> str:
    return decode_html(body, charset)
