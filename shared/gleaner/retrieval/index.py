"""The search index in PostgreSQL: chunks by text hash, which documents are searchable, their embeddings.

Writing (ingest, :meth:`SearchIndex.index_snapshots`): in one transaction, each ingested snapshot that
is its document's current version, with the document active and an enabled ``rag`` routing, becomes
that document's row in ``search_index`` (replacing the previous version's) and the document's
``kb_indexed`` is set; a document of the batch that no longer qualifies leaves the index. Texts not
chunked before are chunked (gleaner.retrieval.chunks) with their full-text vectors (their words as
``knowledge.search_words`` reads them: migrations 0051, 0056); a text already chunked, by this document's
earlier crawl or by any other document, is not touched again. A text no document or composite
searches by any more (the earlier version a new one replaced, a page that left the index) loses its
chunks in the same transaction (:func:`drop_unused_chunks`; migration 0052 swept the older ones).
A current version with an enabled ``skill`` or ``config`` routing gets a ``routing_handovers`` record
and a ``routing.handover`` change event, once per version and destination.

Embedding: with a model cheap enough (the static default, ``Embedder.inline``), the new chunks are
written with their vectors, in the same transaction, so a page is searchable by meaning as soon as
it is ingested. Vectors are written *fresh* (``fresh_embedding``, outside the HNSW index, searched
by the fresh scan: gleaner.retrieval.fresh_scan, whose segment each batch writes beside them) and
enter the index by gleaner.retrieval.fresh's merge, off the crawl's path: ingest never merges.
Otherwise (MiniLM, or
GLEANER_EMBED_AFTER_CRAWL off, or where the model is not installed) :func:`embed_pending` embeds
chunks without a vector of the current model (fresh, too): the CLI runs it when a crawl ends,
``gleaner index`` on demand, and a model change is ``gleaner index --reembed``.
Until a chunk is embedded it is found by full text alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gleaner.changes.events import Change, EventType
from gleaner.errors import GleanerError
from gleaner.provenance.canonical import CanonicalText
from gleaner.retrieval.chunks import Chunk, embedding_input
from gleaner.retrieval.composites import index_composites
from gleaner.retrieval.embedder import Embedder
from gleaner.retrieval.fresh import fresh_count
from gleaner.retrieval.fresh_scan import FreshSigns, sign_bits, write_segment
from gleaner.retrieval.prepare import ChunkPreparer, InProcessPreparer, NewText, vector_rows
from gleaner.retrieval.vectors import TABLE as VECTORS
from gleaner.retrieval.vectors import copy_vectors
from gleaner.store.access.rls import across_tenants
from gleaner.store.notifications.events import record_changes

log = logging.getLogger(__name__)

TEXTS_PER_EMBED_ROUND = 64  # texts read per round of embed_pending: bounded memory, batches stay full

_ENTER = sa.text(
    "INSERT INTO knowledge.search_index (document_id, site_domain, snapshot_id, text_hash)"
    " SELECT d.id, d.site_domain, s.id, st.text_hash"
    " FROM knowledge.document_snapshots s"
    " JOIN knowledge.documents d ON d.id = s.document_id AND d.current_snapshot_id = s.id"
    " JOIN knowledge.snapshot_texts st ON st.snapshot_id = s.id"
    " WHERE s.id = ANY(CAST(:ids AS uuid[])) AND d.status = 'active' AND NOT d.is_deleted"
    " AND NOT d.is_aggregate"  # a print-all edition of the site stays out of search (retrieval/aggregates.py)
    " AND EXISTS (SELECT 1 FROM knowledge.document_routings r WHERE r.document_id = d.id"
    "   AND r.destination = 'rag' AND r.enabled)"
    " ORDER BY d.id"
    " ON CONFLICT (document_id) DO UPDATE SET snapshot_id = EXCLUDED.snapshot_id,"
    "   text_hash = EXCLUDED.text_hash, indexed_at = now()"
    " RETURNING document_id, text_hash"
)
_LEAVE = sa.text(
    "WITH batch AS (SELECT DISTINCT s.document_id FROM knowledge.document_snapshots s"
    "   WHERE s.id = ANY(CAST(:ids AS uuid[])) AND s.document_id IS NOT NULL"
    "   AND s.document_id <> ALL(CAST(:kept AS uuid[]))),"
    " gone AS (DELETE FROM knowledge.search_index i USING batch WHERE i.document_id = batch.document_id)"
    " UPDATE knowledge.documents d SET kb_indexed = false FROM batch WHERE d.id = batch.document_id AND d.kb_indexed"
)
# The index rows the batch's documents and composites hold before it: texts that may leave search.
_HELD = sa.text(
    "SELECT i.text_hash FROM knowledge.document_snapshots s"
    " JOIN knowledge.search_index i ON i.document_id = s.document_id WHERE s.id = ANY(CAST(:ids AS uuid[]))"
    " UNION SELECT i.text_hash FROM knowledge.document_snapshots s"
    " JOIN knowledge.composite_search_index i ON i.composite_document_id = s.composite_document_id"
    " WHERE s.id = ANY(CAST(:ids AS uuid[]))"
)
# Chunks of texts no document or composite of any tenant searches by any more (asked across tenants:
# texts are shared). See drop_unused_chunks.
_DROP_UNUSED = sa.text(
    "DELETE FROM knowledge.text_chunks c WHERE c.text_hash = ANY(CAST(:h AS text[]))"
    " AND NOT EXISTS (SELECT 1 FROM knowledge.search_index i WHERE i.text_hash = c.text_hash)"
    " AND NOT EXISTS (SELECT 1 FROM knowledge.composite_search_index i WHERE i.text_hash = c.text_hash)"
)
# skill / config routings: one hand-over record per current version and destination (the downstream
# system reads the text by its hash); the RETURNING rows are new ones, each announced by one event.
_HANDOVER = sa.text(
    "INSERT INTO knowledge.routing_handovers (site_domain, document_id, snapshot_id, destination, target_ref,"
    " text_hash)"
    " SELECT d.site_domain, d.id, s.id, r.destination, COALESCE(r.target_ref, ''), st.text_hash"
    " FROM knowledge.document_snapshots s"
    " JOIN knowledge.documents d ON d.id = s.document_id AND d.current_snapshot_id = s.id"
    " JOIN knowledge.snapshot_texts st ON st.snapshot_id = s.id"
    " JOIN knowledge.document_routings r ON r.document_id = d.id AND r.enabled"
    "   AND r.destination IN ('skill', 'config')"
    " WHERE s.id = ANY(CAST(:ids AS uuid[])) AND d.status = 'active' AND NOT d.is_deleted"
    " ON CONFLICT DO NOTHING RETURNING document_id, snapshot_id, destination, target_ref"
)
_CHUNKS = sa.text(
    "INSERT INTO knowledge.text_chunks (text_hash, ordinal, chunk_start, chunk_end, heading, tsv)"
    " SELECT h, o, s, e, hd, setweight(knowledge.search_words(hd), 'A') || knowledge.search_words(t)"
    " FROM json_to_recordset(CAST(:rows AS json)) AS c(h text, o int, s int, e int, hd text, t text)"
    " ON CONFLICT (text_hash, ordinal) DO NOTHING"
)
# The same rows with their vectors (an inline embedder): one write per chunk, no later UPDATE. The
# vectors come in binary through a temporary table (gleaner.retrieval.vectors), joined by key; they
# are fresh: searchable at once, in the HNSW index after a merge (gleaner.retrieval.fresh).
_CHUNKS_EMBEDDED = sa.text(
    "INSERT INTO knowledge.text_chunks (text_hash, ordinal, chunk_start, chunk_end, heading, tsv,"
    " fresh_embedding, embedding_model, embedding_dim)"
    " SELECT c.h, c.o, c.s, c.e, c.hd,"
    " setweight(knowledge.search_words(c.hd), 'A') || knowledge.search_words(c.t), v.v,"
    " CASE WHEN v.v IS NOT NULL THEN CAST(:m AS text) END, CASE WHEN v.v IS NOT NULL THEN CAST(:d AS int) END"
    " FROM json_to_recordset(CAST(:rows AS json)) AS c(h text, o int, s int, e int, hd text, t text)"
    f" LEFT JOIN {VECTORS} v ON v.h = c.h AND v.o = c.o"
    " ON CONFLICT (text_hash, ordinal) DO NOTHING"
)


# A chunk without a vector of model :m (none yet, or another model's), fresh or indexed.
_UNEMBEDDED = ("(embedding IS NULL AND fresh_embedding IS NULL) OR embedding_model IS DISTINCT FROM :m")
# Which of a batch's texts would enter the index (as _ENTER's rows) and have no chunks yet: read before
# the transaction, so that their chunking and embedding runs elsewhere meanwhile (retrieval/prepare.py).
_NEED_CHUNKS = sa.text(
    "SELECT DISTINCT st.text_hash FROM knowledge.document_snapshots s"
    " JOIN knowledge.documents d ON d.id = s.document_id AND d.current_snapshot_id = s.id"
    " JOIN knowledge.snapshot_texts st ON st.snapshot_id = s.id"
    " WHERE s.id = ANY(CAST(:ids AS uuid[])) AND d.status = 'active' AND NOT d.is_deleted"
    " AND NOT d.is_aggregate"  # a print-all edition of the site stays out of search (retrieval/aggregates.py)
    " AND EXISTS (SELECT 1 FROM knowledge.document_routings r WHERE r.document_id = d.id"
    "   AND r.destination = 'rag' AND r.enabled)"
    " AND NOT EXISTS (SELECT 1 FROM knowledge.text_chunks c WHERE c.text_hash = st.text_hash)"
)

def _new(text: CanonicalText) -> NewText:
    return NewText(text.text_hash, text.text, text.spans_json)


class IndexUnavailable(GleanerError):
    """A vector operation on a database without pgvector."""


def remove_documents(conn: Connection, document_ids: Sequence[str]) -> int:
    """Take documents out of the index inside the caller's transaction (block, erasure, routing off,
    an aggregate found), with their texts' chunks where nothing else searches by them."""
    if not document_ids:
        return 0
    gone = conn.execute(sa.text("DELETE FROM knowledge.search_index WHERE document_id = ANY(CAST(:d AS uuid[]))"
                                " RETURNING text_hash"), {"d": list(document_ids)}).scalars().all()
    conn.execute(sa.text("UPDATE knowledge.documents SET kb_indexed = false"
                         " WHERE id = ANY(CAST(:d AS uuid[])) AND kb_indexed"), {"d": list(document_ids)})
    drop_unused_chunks(conn, gone)
    return len(gone)


def drop_unused_chunks(conn: Connection, text_hashes: Collection[str]) -> int:
    """Delete the chunks of those texts that no document or composite searches by any more, inside the
    caller's transaction; how many. A page's earlier version, an aggregate page (a book's print-all
    edition doubles every chapter's chunks), a blocked or erased page: kept, their chunks would take
    candidate places in every search (the graph's nearest, a word's chunks) and be merged into the
    graph. A text that comes back (a page reverting, a document unblocked) is chunked again by ingest."""
    if not text_hashes:
        return 0
    with across_tenants(conn):
        return int(conn.execute(_DROP_UNUSED, {"h": sorted(set(text_hashes))}).rowcount or 0)


class SearchIndex:
    def __init__(self, engine: Engine, inline_embedder: Callable[[], Embedder | None] = lambda: None,
                 preparer: ChunkPreparer | None = None) -> None:
        self.engine = engine
        self._vectors: bool | None = None
        # Where new texts are chunked and embedded (retrieval/prepare.py); in-process unless told.
        self._preparer: ChunkPreparer = preparer or InProcessPreparer(inline_embedder)
        self.fresh_signs = FreshSigns()  # this process's copy of the fresh vectors' sign bits (search)

    def has_vectors(self) -> bool:
        """Whether this database has pgvector and the embedding column (else: full text only)."""
        if self._vectors is None:
            with self.engine.connect() as conn:
                self._vectors = bool(conn.execute(sa.text(
                    "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'knowledge'"
                    " AND table_name = 'text_chunks' AND column_name = 'embedding')")).scalar())
        return self._vectors

    def index_snapshots(self, items: Sequence[tuple[str, CanonicalText]]) -> int:
        """Index the batch's current, rag-routed versions (see the module docstring); returns chunks added."""
        added, _fresh = self._index_snapshots(items)
        return added

    def _index_snapshots(self, items: Sequence[tuple[str, CanonicalText]]) -> tuple[int, int]:
        """(chunks added, of which with a fresh vector)."""
        if not items:
            return 0, 0
        ids = [snapshot_id for snapshot_id, _text in items]
        texts = {text.text_hash: text for _snapshot_id, text in items}
        embed = self.has_vectors()
        pending = None
        if self._preparer.offloads:  # sent now, collected inside the transaction: the work overlaps it
            with self.engine.connect() as conn:
                need = [r[0] for r in conn.execute(_NEED_CHUNKS, {"ids": ids}) if r[0] in texts]
            if need:
                pending = self._preparer.start([_new(texts[h]) for h in sorted(need)], embed)
        with self.engine.begin() as conn:
            handed = conn.execute(_HANDOVER, {"ids": ids}).all()
            record_changes(conn, [Change(document_id=str(r[0]), type=EventType.HANDOVER, snapshot_id=str(r[1]),
                                         cause=f"{r[2]}:{r[3]}") for r in handed])
            held = conn.execute(_HELD, {"ids": ids}).scalars().all()
            entered = conn.execute(_ENTER, {"ids": ids}).all()
            composed = index_composites(conn, ids)  # a composite's version: gleaner.retrieval.composites
            kept = [str(r[0]) for r in entered]
            conn.execute(_LEAVE, {"ids": ids, "kept": kept})
            drop_unused_chunks(conn, set(held) - {r[1] for r in [*entered, *composed]})
            if kept:
                conn.execute(sa.text("UPDATE knowledge.documents SET kb_indexed = true"
                                     " WHERE id = ANY(CAST(:d AS uuid[])) AND NOT kb_indexed"), {"d": kept})
            wanted = sorted({r[1] for r in [*entered, *composed] if r[1] in texts})
            if not wanted:
                return 0, 0
            done = {r[0] for r in conn.execute(sa.text(
                "SELECT DISTINCT text_hash FROM knowledge.text_chunks WHERE text_hash = ANY(CAST(:h AS text[]))"),
                {"h": wanted})}
            missing = [h for h in wanted if h not in done]
            if not missing:
                return 0, 0
            ready = pending.result() if pending is not None else None  # None: the job failed
            left = [_new(texts[h]) for h in missing if ready is None or h not in ready.texts]
            sources = [p for p in (ready, self._preparer.here(left, embed) if left else None) if p is not None]
            if len({p.model for p in sources}) > 1:  # one model a statement, never mixed: all here then
                sources = [self._preparer.here([_new(texts[h]) for h in missing], embed)]
            model, dimension = sources[0].model, sources[0].dimension
            prepared = {h: t for p in sources for h, t in p.texts.items()}
            parts = [prepared[h] for h in missing]
            added = sum(p.chunks for p in parts)
            if not added:
                return 0, 0
            payload = "[" + ",".join(p.rows_json for p in parts if p.chunks) + "]"
            if model is None:
                conn.execute(_CHUNKS, {"rows": payload})
            else:
                copy_vectors(conn, b"".join(p.vectors for p in parts))
                conn.execute(_CHUNKS_EMBEDDED, {"rows": payload, "m": model, "d": dimension})
                write_segment(conn, model, [(p.text_hash, o) for p in parts for o in p.ordinals],
                              b"".join(p.signs for p in parts))
        return added, (added if model is not None else 0)

    # -- embeddings -------------------------------------------------------------------------------

    def unembedded(self, model: str, texts: int) -> list[tuple[str, bytes, list[Chunk]]]:
        """Up to ``texts`` texts with chunks lacking a vector of ``model``: (hash, body bytes, those chunks)."""
        with self.engine.connect() as conn:
            hashes = [r[0] for r in conn.execute(sa.text(
                "SELECT DISTINCT text_hash FROM knowledge.text_chunks"
                f" WHERE {_UNEMBEDDED} LIMIT :n"),
                {"m": model, "n": texts})]
            if not hashes:
                return []
            bodies: dict[str, str] = dict(conn.execute(sa.text(
                "SELECT text_hash, body FROM knowledge.canonical_texts WHERE text_hash = ANY(CAST(:h AS text[]))"),
                {"h": hashes}).all())
            chunks: dict[str, list[Chunk]] = {}
            for r in conn.execute(sa.text(
                    "SELECT text_hash, ordinal, chunk_start, chunk_end, heading FROM knowledge.text_chunks"
                    " WHERE text_hash = ANY(CAST(:h AS text[]))"
                    f" AND ({_UNEMBEDDED}) ORDER BY text_hash, ordinal"),
                    {"h": hashes, "m": model}):
                chunks.setdefault(r[0], []).append(Chunk(r[1], r[2], r[3], r[4]))
        return [(h, bodies[h].encode("utf-8"), chunks[h]) for h in hashes if h in bodies and h in chunks]

    def store_vectors(self, model: str, dimension: int, rows: Sequence[tuple[str, int, list[float]]]) -> None:
        """Write vectors fresh (searchable at once; the merge puts them in the HNSW index)."""
        if not rows:
            return
        data = vector_rows([(h, o) for h, o, _v in rows], [v for _h, _o, v in rows])
        with self.engine.begin() as conn:
            copy_vectors(conn, data)
            conn.execute(sa.text(
                "UPDATE knowledge.text_chunks c SET fresh_embedding = r.v, embedding = NULL,"
                " embedding_model = :m, embedding_dim = :d"
                f" FROM {VECTORS} r WHERE c.text_hash = r.h AND c.ordinal = r.o"), {"m": model, "d": dimension})
            write_segment(conn, model, [(h, o) for h, o, _v in rows], sign_bits([v for _h, _o, v in rows]))

    def drop_other_models(self, model: str) -> int:
        """Forget vectors made by any other model, so the re-embedding never ranks two models together."""
        with self.engine.begin() as conn:
            dropped = conn.execute(sa.text(
                "UPDATE knowledge.text_chunks SET embedding = NULL, fresh_embedding = NULL, embedding_model = NULL,"
                " embedding_dim = NULL"
                " WHERE embedding_model IS DISTINCT FROM :m AND embedding_model IS NOT NULL"), {"m": model})
        return int(dropped.rowcount or 0)

    def counts(self) -> dict[str, Any]:
        """Chunks in the index, embedded ones per model, fresh ones, whether vectors are available (gleaner info)."""
        with self.engine.connect() as conn:
            total = int(conn.execute(sa.text("SELECT count(*) FROM knowledge.text_chunks")).scalar_one())
            models: dict[str, int] = {}
            if self.has_vectors():
                models = {str(m): int(n) for m, n in conn.execute(sa.text(
                    "SELECT embedding_model, count(*) FROM knowledge.text_chunks"
                    " WHERE embedding IS NOT NULL OR fresh_embedding IS NOT NULL GROUP BY embedding_model"))}
        fresh = fresh_count(self.engine) if self.has_vectors() else 0
        return {"vectors": self.has_vectors(), "chunks": total, "embedded": models, "fresh": fresh}


def embed_pending(index: SearchIndex, embedder: Embedder, max_chunks: int | None = None) -> int:
    """Embed chunks without a vector of the embedder's model (new ones, or all after a model change)."""
    if not index.has_vectors():
        return 0
    done = 0
    while max_chunks is None or done < max_chunks:
        batch = index.unembedded(embedder.model, TEXTS_PER_EMBED_ROUND)
        if not batch:
            break
        pairs = [(text_hash, body, chunk) for text_hash, body, chunks in batch for chunk in chunks]
        if max_chunks is not None:
            pairs = pairs[:max_chunks - done]
        keys = [(text_hash, chunk.ordinal) for text_hash, _body, chunk in pairs]
        inputs = [embedding_input(body, chunk) for _h, body, chunk in pairs]
        vectors = embedder.embed(inputs)
        index.store_vectors(embedder.model, embedder.dimension,
                            [(h, o, v) for (h, o), v in zip(keys, vectors, strict=True)])
        done += len(keys)
    return done
