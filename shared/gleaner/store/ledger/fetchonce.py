"""Fetch once per run: what map's walk and sample's sample got from the site, kept for scrape.

DESIGN.md "Run control": a URL is fetched at most once per run (robots.txt and
sitemaps aside). Map's link walk and sample's section sample fetch pages scrape
will fetch again; instead each keeps what the site answered as a
:class:`Prefetched` on the run's ledger row (``crawl_page_decisions.prefetched``)
and the body as a run artefact (``runs/{run}/bodies/{page_id}``), and scrape
replays it (:func:`replayed`) as if it had fetched the page itself.

A 304 stands for scrape's fetch only when the page has a current snapshot (the
walk then asked with exactly its validators): then it means to scrape what
scrape's own conditional GET would have meant. The walk also asks pages without
a snapshot conditionally (with the validators it last read them with); their 304
is kept for the sample's verdict, and scrape asks for such a page itself. A
spent budget is never kept: it says nothing about the page.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass
from typing import Any

from gleaner.errors import BlobConflict
from gleaner.fetch.types import ContentKind, FetchOutcome, FetchResult
from gleaner.store.backends.blobs import BlobStore, run_body_key

# What scrape, the walk and the sample accept: one set, so an answer kept by one stage is the answer
# the next would have got.
PAGE_KINDS = (ContentKind.HTML, ContentKind.PDF)


@dataclass(frozen=True, slots=True)
class Prefetched:
    """One answer of the site to this run, as scrape needs it (the body is in ``body_key``)."""

    outcome: str
    reason: str = ""
    status: int | None = None
    final_url: str | None = None
    content_type: str | None = None
    charset: str | None = None
    kind: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    elapsed_ms: int = 0
    body_key: str | None = None
    by: str = ""  # the stage that asked: map or sample
    redirects: tuple[int, ...] = ()  # the statuses of the redirects followed (a permanent move supersedes)
    non_public_address: bool = False  # FetchResult's flags: refused by Gleaner's policy, not by the site
    url_refused: bool = False
    rendered_key: str | None = None  # the page's rendered DOM, when the stage read it with the browser too
    rendering: dict[str, Any] | None = None  # that rendering's fetch facts (render/kept.py)

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items() if v not in (None, "", ())}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Prefetched:
        fields = cls.__dataclass_fields__
        values = {k: v for k, v in data.items() if k in fields}
        if "redirects" in values:
            values["redirects"] = tuple(int(code) for code in values["redirects"])
        return cls(**values)


def kept(blobs: BlobStore, site: str, run_id: str, page_id: str, result: FetchResult, by: str) -> Prefetched | None:
    """Keep ``result`` for scrape: the body as a run artefact, the rest as a value; None if not worth keeping."""
    if result.outcome is FetchOutcome.EXHAUSTED:
        return None
    key = None
    if result.outcome is FetchOutcome.FETCHED and result.body is not None:
        key = run_body_key(site, run_id, page_id)
        # A redelivered stage may fetch a page that changed meanwhile: the first body stands.
        with contextlib.suppress(BlobConflict):
            blobs.put(key, result.body, result.content_type or "application/octet-stream")
    return Prefetched(str(result.outcome), result.reason, result.status, result.final_url, result.content_type,
                      result.charset, str(result.kind) if result.kind else None, result.etag, result.last_modified,
                      result.elapsed_ms, key, by, result.redirects, result.non_public_address, result.url_refused)


def replayable(prefetched: dict[str, Any] | None, has_snapshot: bool) -> bool:
    """Whether a ledger row's kept answer may stand for a fetch: a 304 only where the page has a current
    snapshot (the walk asked with its validators)."""
    if not prefetched:
        return False
    return prefetched.get("outcome") != FetchOutcome.NOT_MODIFIED or has_snapshot


def replay_for(blobs: BlobStore, prefetched: dict[str, Any] | None, url: str, key: str | None,
               has_snapshot: bool) -> FetchResult | None:
    """A ledger row's kept answer as a FetchResult, if it may stand for a fetch and its body (if any) is
    still there (run artefacts expire); else None, and the page is asked for."""
    if prefetched is None or not replayable(prefetched, has_snapshot):
        return None
    return replayed(blobs, Prefetched.from_dict(prefetched), url, key)


def replayed(blobs: BlobStore, prefetched: Prefetched, url: str, key: str | None) -> FetchResult | None:
    """The kept answer as a FetchResult for ``url``; None if its body is gone (run artefacts expire)."""
    body = None
    if prefetched.body_key is not None:
        try:
            body = blobs.get(prefetched.body_key)
        except KeyError:
            return None
    return FetchResult(url, FetchOutcome(prefetched.outcome), prefetched.reason, final_url=prefetched.final_url,
                       status=prefetched.status, content_type=prefetched.content_type, charset=prefetched.charset,
                       kind=ContentKind(prefetched.kind) if prefetched.kind else None, body=body,
                       etag=prefetched.etag, last_modified=prefetched.last_modified,
                       elapsed_ms=prefetched.elapsed_ms, key=key, redirects=prefetched.redirects,
                       non_public_address=prefetched.non_public_address, url_refused=prefetched.url_refused)
