"""What each MCP tool answers, as plain functions of (deps, caller, arguments) -> JSON object.

No second implementation: searching is :func:`gleaner.retrieval.search`, a slice is
:func:`gleaner.serving.textsapi.text_slice` (the bytes of ``gleaner slice`` and ``/v1/texts``), citing and
verifying are the citation store's (``gleaner cite``, ``gleaner citation verify|drift``), and change
events, runs and documents are the back office API's own handlers (``/v1/changes``, ``/v1/runs``,
``/v1/documents``), called with the caller's :class:`~gleaner.backoffice.api.Access`.

Each call runs under the caller's tenant scope, so row-level security hides other tenants' rows;
a site token asking for another site's id or text hash gets the answer an absent one gets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gleaner.agents.references import WorkspaceCaller
from gleaner.app import Deps
from gleaner.backoffice import api
from gleaner.backoffice.api import Access
from gleaner.backoffice.wsgi import acting_for
from gleaner.errors import InvalidInput

MAX_RESULTS = 50
MAX_EVENTS = api.MAX_PAGE


class ToolRefused(Exception):
    """A call the tool answers with an error the agent can read (bad input, not found)."""


def _api(deps: Deps, access: Access, path: str, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One GET of the back office API, as the caller; its error becomes the tool's."""
    args = {k: str(v) for k, v in (query or {}).items() if v is not None}
    status, answer = api.handle(api.ApiRequest("GET", path, args, b"", access), deps)
    if status != 200:
        raise ToolRefused(str(answer.get("error", f"status {status}")))
    return answer


def _site_arg(access: Access, site: str | None) -> str | None:
    """The site a call may look at: a site token's own; another site is as unknown as a missing one."""
    if site is not None and not api.valid_site_domain(site):
        raise ToolRefused("site must be a site domain such as example.com")
    if access.site_domain is not None and site not in (None, access.site_domain):
        raise ToolRefused(f"no site {site}")
    return site or access.site_domain


def search(deps: Deps, access: Access, query: str, site: str | None = None, limit: int = 10) -> dict[str, Any]:
    """Ranked chunks of current, routed documents; each hit's (text_hash, start, end) is a slice for ``get``."""
    from gleaner.retrieval import search as search_copy

    if not 1 <= limit <= MAX_RESULTS:
        raise ToolRefused(f"limit must be between 1 and {MAX_RESULTS}")
    site = _site_arg(access, site)
    with acting_for(access):
        try:
            return search_copy(deps, query, site_domain=site, limit=limit)
        except InvalidInput as exc:  # an empty or overlong query: the agent reads why
            raise ToolRefused(str(exc)) from None


def get(deps: Deps, access: Access | WorkspaceCaller, text_hash: str, start: int | None = None,
        end: int | None = None) -> dict[str, Any]:
    """Bytes [start, end) of a stored canonical text, verbatim (``gleaner slice``'s bytes), as UTF-8 text."""
    from gleaner.serving.textsapi import TextReader, text_slice

    query = {k: str(v) for k, v in (("start", start), ("end", end)) if v is not None}
    # The one reader rule of /v1/texts and `gleaner slice`: a site reads the texts of its own versions,
    # a workspace those of the references its feed brought.
    if isinstance(access, WorkspaceCaller):
        reader = TextReader.workspace(access.workspace_id)
    else:
        reader = TextReader.operator() if access.site_domain is None else TextReader.site(access.site_domain)
    status, answer = text_slice(deps, text_hash, query, reader)
    if status != 200:
        raise ToolRefused(str(answer["error"]))
    return answer


def cite(deps: Deps, access: Access, url: str, quote: str, site: str | None = None) -> dict[str, Any]:
    """``gleaner cite``: bind a short verbatim quote to the exact bytes of URL's current version."""
    from gleaner.store.documents.citations import AmbiguousUrl, Refused
    from gleaner.urls import canonicalize

    site = _site_arg(access, site)
    try:
        canonical = canonicalize(url)
    except (InvalidInput, ValueError) as exc:
        raise ToolRefused(f"not a URL Gleaner can keep: {exc}") from None
    with acting_for(access):
        try:
            document = deps.provenance.document_at(canonical, site)
        except AmbiguousUrl as exc:
            raise ToolRefused(str(exc)) from None
        if document is None:
            raise ToolRefused(f"no document for {canonical}" + (f" in site {site}" if site else ""))
        cited = deps.provenance.cite(document, quote)
    if isinstance(cited, Refused):
        raise ToolRefused(f"refused: {cited.refusal.explain()} ({cited.refusal})")
    return dict(cited.to_dict())


def verify(deps: Deps, access: Access, citation_id: str | None = None, text_hash: str | None = None,
           start: int | None = None, end: int | None = None, quote: str | None = None) -> dict[str, Any]:
    """``citation verify`` and ``citation drift`` at once: the citation against its own bytes and the page now.

    Without a citation id, the byte range ``(text_hash, start, end)`` is checked against ``quote``: a
    search hit of a page or a composite, whose bytes the caller read with ``get``."""
    if citation_id is None:
        return verify_range(deps, access, text_hash, start, end, quote)
    with acting_for(access):
        cited = deps.provenance.citation(citation_id)
        if cited is None:
            raise ToolRefused(f"no citation {citation_id[:80]}")
        verdict, drift = deps.provenance.drift_of(cited)
    return {**cited.to_dict(), "state": str(verdict.state), "reason": verdict.reason or None,
            "drift": {"state": str(drift.state), "reason": drift.reason or None, "current": drift.current}}


def verify_range(deps: Deps, access: Access, text_hash: str | None, start: int | None, end: int | None,
                 quote: str | None) -> dict[str, Any]:
    """Whether the stored text named ``text_hash`` holds ``quote`` at bytes [start, end): ``verified``
    (the bytes hash to the name and are the quote, on word boundaries), ``rejected`` (they are not),
    ``unverifiable`` (the stored bytes no longer hash to the name)."""
    from gleaner.provenance.citations import check_slice
    from gleaner.provenance.verification import VerifyState
    from gleaner.serving.textsapi import TextReader, read_text

    if text_hash is None or start is None or end is None or quote is None:
        raise ToolRefused("give a citation_id, or text_hash, start, end and the quote those bytes should hold")
    reader = TextReader.operator() if access.site_domain is None else TextReader.site(access.site_domain)
    body = read_text(deps, text_hash, reader) if len(text_hash) == 64 else None
    if body is None:
        raise ToolRefused(f"no canonical text {text_hash[:80]}")
    check = check_slice(body, text_hash, start, end, quote)
    state, reason = ((VerifyState.UNVERIFIABLE, "bytes-corrupt") if not check.intact else
                     (VerifyState.REJECTED, "not-verbatim") if not check.holds else (VerifyState.VERIFIED, None))
    return {"text_hash": text_hash, "start": start, "end": end, "quote": quote, "state": str(state),
            "reason": reason}


def changes(deps: Deps, access: Access, site: str | None = None, since: str | None = None, limit: int = 100
            ) -> dict[str, Any]:
    """Change events, oldest first (``/v1/changes``)."""
    site = _site_arg(access, site)
    with acting_for(access):
        return _api(deps, access, "/v1/changes", {"site": site, "since": since, "limit": limit})


def crawl_status(deps: Deps, access: Access, run_id: str | None = None, site: str | None = None, limit: int = 10
                 ) -> dict[str, Any]:
    """One run's counters and outcomes (``/v1/runs/{run}``), else the newest runs (``/v1/runs``)."""
    with acting_for(access):
        if run_id:
            return _api(deps, access, f"/v1/runs/{run_id}")
        return _api(deps, access, "/v1/runs", {"site": _site_arg(access, site), "limit": limit})


def current_version(deps: Deps, access: Access, document_id: str) -> dict[str, Any]:
    """A document's current version: its content.md with url, version and the current text's hash."""
    with acting_for(access):
        found = _api(deps, access, f"/v1/documents/{document_id}")
        current = next((v for v in found["versions"] if v.get("current")), None)
        if current is None:
            raise ToolRefused(f"document {document_id} has no version yet")
        version = _api(deps, access, f"/v1/documents/{document_id}/versions/{current['version']}")
        text = deps.provenance.current_text(found["document"]["id"])
    return {"document_id": version["document_id"], "url": version["url"], "version": version["version"],
            "site_domain": found["document"].get("site_domain"), "title": found["document"].get("title"),
            "text_hash": text.text_hash if text is not None else None,
            "text_length": len(text.body) if text is not None else None, "markdown": version["body"]}
