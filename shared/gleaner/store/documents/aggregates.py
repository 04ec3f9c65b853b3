"""Aggregate pages in PostgreSQL: read a site's current texts, flag its aggregates, take them out of search.

What makes a page an aggregate is :mod:`gleaner.retrieval.aggregates` (pure). After each ingested batch,
a site whose largest current text is far above its typical one (the only way an aggregate can be among
them) is read whole and its texts that far above are judged; an aggregate found gets
``documents.is_aggregate`` (which the search index reads: gleaner.retrieval.index), leaves the index,
and its ledger row in the run says ``content_kind: aggregate``. It stays kept, versioned and readable
like any page. Pages flagged before are judged again: one that is no aggregate now (it changed, or
an older rule flagged it) loses the flag and its current version enters the index again.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gleaner.provenance.canonical import CanonicalText
from gleaner.retrieval.aggregates import KEY_BYTES, Aggregate, find_aggregates, paragraphs
from gleaner.retrieval.index import remove_documents
from gleaner.store.documents.texts import stored_texts

# A site with more current pages than this is not judged (reading it whole after every batch costs too much).
MAX_SITE_PAGES = 5000
# Only a text this many times the site's average length, and at least this long, can be an aggregate.
SIZE_RATIO = 5
MIN_BYTES = 20_000

_CURRENT = (
    " FROM knowledge.documents d JOIN knowledge.snapshot_texts st ON st.snapshot_id = d.current_snapshot_id"
    " JOIN knowledge.canonical_texts t ON t.text_hash = st.text_hash"
    " WHERE d.site_domain = :s AND NOT d.is_deleted"
)


def mark_aggregates(engine: Engine, site: str, run_id: str | None,
                    reindex: Callable[[list[tuple[str, CanonicalText]]], object]) -> dict[str, Aggregate]:
    """Judge the site's pages, flag the aggregates not flagged yet and clear the flag of pages no longer
    aggregates (their current versions handed to ``reindex``: the search index's ``index_snapshots``);
    the new aggregates, by document id."""
    with engine.connect() as conn:
        shape = conn.execute(sa.text(
            "SELECT count(*), avg(t.byte_length), max(t.byte_length) FILTER (WHERE NOT d.is_aggregate),"
            " min(t.byte_length) FILTER (WHERE d.is_aggregate)" + _CURRENT), {"s": site}).one()
        pages, average, largest = int(shape[0] or 0), float(shape[1] or 0), int(shape[2] or 0)
        floor = max(MIN_BYTES, SIZE_RATIO * average)
        smallest_flagged = floor if shape[3] is None else int(shape[3])
        # Judged when a page could be a new aggregate, or one flagged is too small to be one now.
        if pages < 4 or pages > MAX_SITE_PAGES or (largest < floor and smallest_flagged >= floor):
            return {}
        rows = conn.execute(sa.text("SELECT d.id, d.is_aggregate, t.byte_length, d.current_snapshot_id, t.text_hash"
                                    + _CURRENT), {"s": site}).all()
        keys = _paragraph_keys(conn, {r[4] for r in rows})
    texts = {str(r[0]): keys.get(r[4], set()) for r in rows}
    judged = find_aggregates(texts, candidates={str(r[0]) for r in rows if int(r[2] or 0) >= floor})
    flagged = {str(r[0]) for r in rows if r[1]}
    stale = [r for r in rows if r[1] and str(r[0]) not in judged]
    if stale:
        _clear(engine, [str(r[0]) for r in stale], [(str(r[3]), r[4]) for r in stale], reindex)
    found = {doc: why for doc, why in judged.items() if doc not in flagged}
    if not found:
        return {}
    ids = list(found)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE knowledge.documents SET is_aggregate = true, updated_at = now()"
                             " WHERE id = ANY(CAST(:d AS uuid[]))"), {"d": ids})
        remove_documents(conn, ids)
        if run_id is not None:
            conn.execute(sa.text(
                "UPDATE knowledge.crawl_page_decisions c SET decision_metadata = COALESCE(c.decision_metadata,"
                " '{}'::jsonb) || jsonb_build_object('content_kind', 'aggregate', 'aggregate', t.why)"
                " FROM json_to_recordset(CAST(:rows AS json)) AS t(d uuid, why text)"
                " WHERE c.run_id = :r AND c.document_id = t.d"),
                {"r": run_id, "rows": json.dumps([{"d": d, "why": a.describe()} for d, a in found.items()])})
    return found


def _paragraph_keys(conn: Connection, text_hashes: set[str]) -> dict[str, set[bytes]]:
    """Each text's paragraph keys, read and split only for texts this process has not seen: a text never
    changes under its hash, and a site is judged again after every batch (its texts read whole each
    time, most of a large site's judging was reading and splitting the same texts again)."""
    packed = {h: _KEYS.get(h) for h in text_hashes}
    missing = sorted(h for h, keys in packed.items() if keys is None)
    if missing:
        if len(_KEYS) + len(missing) > _KEYS_LIMIT:
            _KEYS.clear()  # a bounded memory, not an LRU: refilled by the next judgings
        for text_hash, body in conn.execute(sa.text(
                "SELECT text_hash, body FROM knowledge.canonical_texts WHERE text_hash = ANY(CAST(:h AS text[]))"),
                {"h": missing}):
            packed[text_hash] = _KEYS[text_hash] = b"".join(sorted(paragraphs(body)))
    return {h: {keys[i:i + KEY_BYTES] for i in range(0, len(keys), KEY_BYTES)} for h, keys in packed.items()
            if keys is not None}


# Text hash -> its paragraph keys, concatenated (KEY_BYTES each): about 1 kB a page.
_KEYS: dict[str, bytes] = {}
_KEYS_LIMIT = 2 * MAX_SITE_PAGES


def _clear(engine: Engine, documents: list[str], versions: list[tuple[str, str]],
           reindex: Callable[[list[tuple[str, CanonicalText]]], object]) -> None:
    """Pages flagged before that are no aggregates now: the flag off, their current versions (snapshot id,
    text hash) indexed again."""
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE knowledge.documents SET is_aggregate = false, updated_at = now()"
                             " WHERE id = ANY(CAST(:d AS uuid[])) AND is_aggregate"), {"d": documents})
        texts = stored_texts(conn, sorted({h for _s, h in versions}))
    reindex([(snapshot_id, texts[text_hash]) for snapshot_id, text_hash in versions if text_hash in texts])
