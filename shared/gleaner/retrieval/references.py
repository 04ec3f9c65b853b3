"""Reference items (the feed's ``_references``): whole-record embeddings and their two-score search.

The feed spec embeds each reference item whole (``reference_items.embedding``: title, summary and the
start of the body, as the model reads at most 256 word pieces) and ranks previews by
``0.6 * embedding_score + 0.4 * fulltext_score``, each shown separately; the verbatim step
(``refs show`` / ``/refs/{id}``) never includes the vector. Reference items never mix with site
documents: they have their own table, index and search. Without pgvector, search is the full-text
ranking of :meth:`gleaner.store.feeds.references.ReferenceStore.search` (``embedding_score`` null).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from gleaner.retrieval.embedder import Embedder
from gleaner.retrieval.ranking import EMBEDDING_WEIGHT, FULLTEXT_WEIGHT

if TYPE_CHECKING:
    from gleaner.app import Deps

RECORD_CHARS = 2000  # more than the model reads: the whole record's start is what gets embedded
ITEMS_PER_ROUND = 64
CANDIDATES = 50


# Nearest items by meaning: every item through the HNSW index; a workspace's items exactly. The index's
# nearest may all be other workspaces' (it holds every item), so a workspace's are ranked among
# themselves: read through its ledger rows, ordered by an expression the index cannot serve.
_NEAREST = sa.text(
    "SELECT id FROM knowledge.reference_items WHERE embedding_model = :m"
    " ORDER BY embedding OPERATOR(public.<=>) CAST(:v AS public.vector) LIMIT :k")
_NEAREST_OF_WORKSPACE = sa.text(
    "SELECT r.id FROM knowledge.reference_items r WHERE r.embedding_model = :m AND r.id IN"
    " (SELECT fa.reference_item_id FROM knowledge.feed_articles fa WHERE fa.workspace_id = CAST(:w AS text))"
    " ORDER BY (r.embedding OPERATOR(public.<=>) CAST(:v AS public.vector)) + 0 LIMIT :k")


def _vector(values: list[float]) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in values) + "]"


def embed_references(deps: Deps, embedder: Embedder) -> int:
    """Embed reference items without a vector of the embedder's model; how many were embedded."""
    if not deps.search_index.has_vectors():
        return 0
    done = 0
    while True:
        with deps.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT id, title, coalesce(summary, ''), left(body, :n) FROM knowledge.reference_items"
                " WHERE embedding IS NULL OR embedding_model IS DISTINCT FROM :m ORDER BY id LIMIT :k"),
                {"n": RECORD_CHARS, "m": embedder.model, "k": ITEMS_PER_ROUND}).all()
        if not rows:
            return done
        vectors = embedder.embed([f"{r[1]}\n{r[2]}\n{r[3]}" for r in rows])
        payload = json.dumps([{"i": str(r[0]), "v": _vector(v)} for r, v in zip(rows, vectors, strict=True)])
        with deps.engine.begin() as conn:
            conn.execute(sa.text(
                "UPDATE knowledge.reference_items r SET embedding = CAST(x.v AS public.vector),"
                " embedding_model = :m, embedding_dim = :d"
                " FROM json_to_recordset(CAST(:rows AS json)) AS x(i uuid, v text) WHERE r.id = x.i"),
                {"rows": payload, "m": embedder.model, "d": embedder.dimension})
        done += len(rows)


def search_references(deps: Deps, query: str, limit: int, workspace_id: str | None = None) -> list[dict[str, Any]]:
    """Step 1 of the feed's retrieval: ranked previews, each with both scores and the blend (``score``).

    With ``workspace_id``, only that workspace's items (those its feed brought); else every item."""
    matches = deps.references.search(query, max(limit, CANDIDATES), workspace_id)
    if not deps.search_index.has_vectors():
        for m in matches:
            m["score"] = m["fulltext_score"]
        return matches[:limit]
    embedder = deps.embedder
    vector = _vector(embedder.embed([query])[0])
    with deps.engine.begin() as conn:
        conn.execute(sa.text(f"SET LOCAL hnsw.ef_search = {CANDIDATES}"))
        near = conn.execute(_NEAREST if workspace_id is None else _NEAREST_OF_WORKSPACE,
                            {"m": embedder.model, "v": vector, "k": CANDIDATES, "w": workspace_id}).scalars().all()
        ids = list(dict.fromkeys([m["reference_id"] for m in matches] + [str(i) for i in near]))
        scored: dict[str, float] = dict(conn.execute(sa.text(
            "SELECT CAST(id AS text), GREATEST(0, 1 - (embedding OPERATOR(public.<=>) CAST(:v AS public.vector)))"
            " FROM knowledge.reference_items WHERE id = ANY(CAST(:i AS uuid[])) AND embedding_model = :m"),
            {"v": vector, "i": ids, "m": embedder.model}).all())
    by_id = {m["reference_id"]: m for m in matches}
    missing = [i for i in ids if i not in by_id]
    if missing:  # found by meaning only: their previews, with a full-text score of 0
        for item in deps.references.previews(missing):
            by_id[item["reference_id"]] = item
    results = []
    for item_id, item in by_id.items():
        es = round(min(1.0, float(scored.get(item_id) or 0.0)), 6)
        item["embedding_score"] = es
        item["score"] = round(EMBEDDING_WEIGHT * es + FULLTEXT_WEIGHT * float(item["fulltext_score"]), 6)
        results.append(item)
    results.sort(key=lambda r: (-r["score"], r["reference_id"]))
    return results[:limit]
