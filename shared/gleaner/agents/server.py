"""Gleaner's MCP server: the tools and the document resource on the official SDK's ``MCPServer``.

The same server object answers over stdio (``gleaner mcp``, one caller fixed at start) and over
streamable HTTP (``/mcp`` under ``gleaner serve``, each request's caller decided by the HTTP gate
and handed in through the WSGI environ; see :mod:`gleaner.agents.http`). Tools are plain sync
functions: the SDK runs them on a worker thread, so the database calls never block its event loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError

from gleaner import __version__
from gleaner.agents import references, tools
from gleaner.agents.references import WorkspaceCaller
from gleaner.app import Deps
from gleaner.backoffice.api import Access

# Who a call acts for: the operator or a site (Access), or a workspace (the feed's reference items only).
Caller = Access | WorkspaceCaller
# What a workspace token may call: the reference items' two steps, and `get` for their texts.
WORKSPACE_TOOLS = frozenset({references.refs_search, references.refs_get, tools.get})

# The key under which the HTTP bridge puts the caller into the WSGI environ (never a header: a client
# could send one of those).
ENVIRON_ACCESS = "gleaner.access"

INSTRUCTIONS = """Gleaner keeps a verbatim, versioned markdown copy of web sites.
Use `search` for ranked passages; each hit names a byte range (text_hash, start, end) of the page's
canonical text. Quote only what `get` returns for that range: it is the stored bytes, verbatim.
`cite` binds a short quote (at most 15 words) to those bytes and returns a citation id that
`verify` checks later. `changes` lists what changed; `crawl_status` shows runs.
The feed's reference items have their own two steps: `refs_search` (ranked previews) and
`refs_get` (one item verbatim); a workspace token reaches only those (and `get` for their texts).
The resource gleaner://documents/{document_id} is a document's current version."""


def caller_of(ctx: Context[Any, Any], fixed: Caller | None) -> Caller:
    """Who this call acts for: the HTTP gate's verdict for the request, else the stdio server's caller."""
    request = ctx.request_context.request if ctx.request_context is not None else None
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict):
        access = scope.get("wsgi_environ", {}).get(ENVIRON_ACCESS)
        if isinstance(access, Access | WorkspaceCaller):
            return access
        raise ToolError("this request carries no caller")  # only reachable if mounted without the gate
    if fixed is None:
        raise ToolError("this server has no caller configured")
    return fixed


def build_server(deps: Deps, fixed: Caller | None = None) -> MCPServer[Any]:
    """The MCP server over ``deps``; ``fixed`` is the caller of a stdio server (None: HTTP only)."""
    # The SDK calls logging.basicConfig at this level when nothing configured logging yet (the CLI
    # always has): WARNING keeps a library user's root logger as quiet as Gleaner's own default.
    server: MCPServer[Any] = MCPServer(name="gleaner", version=__version__, instructions=INSTRUCTIONS,
                                       warn_on_duplicate_tools=False, log_level="WARNING")

    def run(fn: Callable[..., dict[str, Any]], ctx: Context[Any, Any], **kwargs: Any) -> dict[str, Any]:
        caller = caller_of(ctx, fixed)
        if isinstance(caller, WorkspaceCaller) and fn not in WORKSPACE_TOOLS:
            raise ToolError(references.SITES_REFUSED)
        try:
            return fn(deps, caller, **kwargs)
        except (tools.ToolRefused, references.RefsRefused) as exc:
            raise ToolError(str(exc)) from None

    @server.tool()
    def search(query: str, ctx: Context[Any, Any], site: str | None = None, limit: int = 10) -> dict[str, Any]:
        """Search the kept copy: the best passage of each of the best current pages, best first
        (page_rank 1, 2, ...), each with url, title, version, a preview, embedding/full-text scores
        and the byte range (text_hash, start, end) that `get` returns verbatim; no results and a note
        when nothing matches well."""
        return run(tools.search, ctx, query=query, site=site, limit=limit)

    @server.tool()
    def get(text_hash: str, ctx: Context[Any, Any], start: int | None = None, end: int | None = None
            ) -> dict[str, Any]:
        """Bytes [start, end) of a stored canonical text, verbatim (omit both for the whole text)."""
        return run(tools.get, ctx, text_hash=text_hash, start=start, end=end)

    @server.tool()
    def cite(url: str, quote: str, ctx: Context[Any, Any], site: str | None = None) -> dict[str, Any]:
        """Bind a verbatim quote (at most 15 words, no personal data) to the exact bytes of the page's
        current version; returns a citation id and its byte range."""
        return run(tools.cite, ctx, url=url, quote=quote, site=site)

    @server.tool()
    def verify(ctx: Context[Any, Any], citation_id: str | None = None, text_hash: str | None = None,
               start: int | None = None, end: int | None = None, quote: str | None = None) -> dict[str, Any]:
        """Check a citation: state verified|rejected|unverifiable against its own bytes, and its drift
        (holds|changed|drifted|gone|unknown) against the page as it is now. Or, without citation_id,
        check that the stored text text_hash holds quote at bytes [start, end) (a search hit, a
        composite's included): state verified|rejected|unverifiable."""
        return run(tools.verify, ctx, citation_id=citation_id, text_hash=text_hash, start=start, end=end,
                   quote=quote)

    @server.tool()
    def changes(ctx: Context[Any, Any], site: str | None = None, since: str | None = None, limit: int = 100
                ) -> dict[str, Any]:
        """Change events (document.new, document.changed, document.removed, ...), oldest first;
        since is an ISO 8601 time."""
        return run(tools.changes, ctx, site=site, since=since, limit=limit)

    @server.tool()
    def crawl_status(ctx: Context[Any, Any], run_id: str | None = None, site: str | None = None, limit: int = 10
                     ) -> dict[str, Any]:
        """One crawl run's status and counters, or the newest runs (of one site)."""
        return run(tools.crawl_status, ctx, run_id=run_id, site=site, limit=limit)

    @server.tool()
    def refs_search(query: str, ctx: Context[Any, Any], limit: int = 10) -> dict[str, Any]:
        """Search the feed's reference items (a workspace token: those its feed brought): ranked
        previews, best first, each with embedding_score, fulltext_score and their blend score; read
        one with `refs_get`. Site documents are never among them."""
        return run(references.refs_search, ctx, query=query, limit=limit)

    @server.tool()
    def refs_get(reference_id: str, ctx: Context[Any, Any]) -> dict[str, Any]:
        """One reference item verbatim (title, body, summary, source, ledger rows), without its
        embedding; text_hash names its page's canonical text for `get`."""
        return run(references.refs_get, ctx, reference_id=reference_id)

    @server.resource("gleaner://documents/{document_id}", name="document", mime_type="application/json",
                     description="A document's current version: url, version, text_hash and its markdown.")
    def document(document_id: str, ctx: Context[Any, Any]) -> str:
        caller = caller_of(ctx, fixed)
        if isinstance(caller, WorkspaceCaller):
            raise ResourceNotFoundError(references.SITES_REFUSED)
        try:
            return json.dumps(tools.current_version(deps, caller, document_id))
        except tools.ToolRefused as exc:
            raise ResourceNotFoundError(str(exc)) from None

    return server
