"""The feed's reference items through MCP: the two-step retrieval for workspace tokens (and the operator).

A workspace token (``gleaner tokens add --workspace W``, the feed poller's credential) is an MCP
caller of its own kind, :class:`WorkspaceCaller`: it reaches the reference items its workspace's
feed brought and their texts, and nothing of the sites. The two steps are the feed spec's, the same
functions as ``GET /refs?q=`` and ``GET /refs/{id}``:

- ``refs_search``: ranked previews, each with ``embedding_score``, ``fulltext_score`` and their blend
  ``score`` (:func:`gleaner.retrieval.references.search_references`, narrowed to the workspace);
- ``refs_get``: one item verbatim, without its embedding, with the workspace's own ledger rows and
  the other workspaces' only as counts (as ``/refs/{id}`` shows them). An item no feed of the
  workspace brought is absent to it.

A site token never reaches references (they are never blended into a client's own knowledge); the
operator reaches every item. Reference rows belong to Gleaner's references tenant, so each call runs
in that tenant's scope.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from gleaner import tenancy
from gleaner.app import Deps
from gleaner.backoffice.api import Access
from gleaner.cloud.callers import bearer_token
from gleaner.references.identity import REFERENCES_SITE
from gleaner.store.access.tokens import TOKEN_PREFIX

MAX_RESULTS = 50
SITES_REFUSED = ("a workspace token reaches the feed's reference items only: use refs_search, refs_get "
                 "and get (for a reference's text)")
REFERENCES_REFUSED = "reference items are the feed's: a site token reaches its own site's documents only"


class RefsRefused(Exception):
    """A reference call the tool answers with an error the agent can read."""


@dataclass(frozen=True, slots=True)
class WorkspaceCaller:
    """A caller holding a workspace token: that workspace's reference items and their texts only."""

    workspace_id: str


def workspace_caller(deps: Deps, authorization: str) -> WorkspaceCaller | None:
    """The workspace an ``Authorization`` value's live workspace token acts for, else None."""
    token = bearer_token(authorization)
    if token is None or not token.startswith(TOKEN_PREFIX) or len(token) >= 100:
        return None
    found = deps.tokens.caller_for(token)
    return WorkspaceCaller(found.workspace_id) if found is not None and found.workspace_id else None


def _workspace_of(caller: Access | WorkspaceCaller) -> str | None:
    """The workspace a reference call is narrowed to (None: the operator's every item)."""
    if isinstance(caller, WorkspaceCaller):
        return caller.workspace_id
    if not caller.is_operator:
        raise RefsRefused(REFERENCES_REFUSED)
    return None


def refs_search(deps: Deps, caller: Access | WorkspaceCaller, query: str, limit: int = 10) -> dict[str, Any]:
    """Step 1: ranked previews of the caller's reference items, with both scores and the blend."""
    from gleaner.retrieval.references import search_references

    workspace = _workspace_of(caller)
    if not isinstance(query, str) or not query.strip():
        raise RefsRefused("the search query must not be empty")
    if not 1 <= limit <= MAX_RESULTS:
        raise RefsRefused(f"limit must be between 1 and {MAX_RESULTS}")
    with tenancy.scope(REFERENCES_SITE):
        return {"query": query, "results": search_references(deps, query.strip(), limit, workspace)}


def refs_get(deps: Deps, caller: Access | WorkspaceCaller, reference_id: str) -> dict[str, Any]:
    """Step 2: one reference item verbatim (title, body, summary, provenance), never its embedding."""
    workspace = _workspace_of(caller)
    try:
        reference_id = str(uuid.UUID(reference_id))
    except ValueError:
        raise RefsRefused(f"{reference_id[:100]!r} is not a reference id (a UUID)") from None
    with tenancy.scope(REFERENCES_SITE):
        item = deps.references.get(reference_id)
    if item is None or (workspace is not None and
                        not any(a["workspace_id"] == workspace for a in item["articles"])):
        raise RefsRefused(f"no reference item {reference_id}")
    if workspace is not None:
        others = [a for a in item["articles"] if a["workspace_id"] != workspace]
        item["articles"] = [a for a in item["articles"] if a["workspace_id"] == workspace]
        item["other_workspaces"] = {"workspaces": len({a["workspace_id"] for a in others}),
                                    "articles": len(others)}
    item.pop("embedding", None)  # the verbatim step never carries the vector (the feed spec)
    # The canonical text of the page the item was made from (its source version's, else the page's
    # newest), so `get` can slice it verbatim.
    with tenancy.scope(REFERENCES_SITE), deps.engine.connect() as conn:
        item["text_hash"] = conn.execute(sa.text(
            "SELECT t.text_hash FROM knowledge.snapshot_texts t"
            " JOIN knowledge.document_snapshots s ON s.id = t.snapshot_id"
            " WHERE s.document_id = CAST(:d AS uuid)"
            " ORDER BY s.id = CAST(:s AS uuid) DESC NULLS LAST, s.version DESC LIMIT 1"),
            {"d": item["source_document_id"], "s": item["source_snapshot_id"]}).scalar()
    return item
