"""The ingest stage's writes: canonical texts by BLAKE3, their span ledger and SimHash, the snapshot links.

One statement per message, whatever its size. The bodies travel as one text
parameter, their UTF-8 bytes concatenated, which the statement turns back into bytes
once and slices by byte offsets: pg8000 would send ``bytes`` as hex (twice the size,
then decoded by the server), a JSON document of bodies cost an escaping pass over every
character and ``text[]`` parameters a Python loop per character (README, profile
evidence). Everything else travels as JSON built from strings the extraction
processes already encoded (the spans of each text).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gleaner.provenance.canonical import CanonicalText
from gleaner.provenance.simhash import bands, to_signed

# Two statements, links first. Row-level security shows a tenant a canonical text only through its own
# versions' links (gleaner.store.access.rls.PARENT_POLICIES), and the texts statement's RETURNING must see the
# texts it inserts: so the links are in place one statement earlier (their foreign key to the text is
# checked at commit, migration 0021).
_LINK = sa.text(
    "WITH links AS ("
    "  SELECT * FROM json_to_recordset(CAST(:links AS json)) AS l(i uuid, h text)"
    "), linked AS ("
    "  INSERT INTO knowledge.snapshot_texts (snapshot_id, source_blake3, text_hash)"
    # source_blake3: the BLAKE3 of the bytes as fetched, which the snapshot recorded (seed 004)
    "  SELECT l.i, s.source_blake3, l.h FROM links l JOIN knowledge.document_snapshots s ON s.id = l.i"
    "  ON CONFLICT (snapshot_id) DO NOTHING"
    ") UPDATE knowledge.documents d SET last_processed_at = now() FROM knowledge.document_snapshots s, links l"
    "  WHERE s.id = l.i AND d.id = s.document_id"
)
# Data-modifying CTEs all run, to completion, whether or not the final SELECT reads them. A text's spans
# are inserted only with the text itself (joined to ``inserted``), so none can exist yet: no ON CONFLICT
# there, which would probe the spans' key once more per span before inserting it.
_STORE = sa.text(
    "WITH texts AS ("
    "  SELECT * FROM json_to_recordset(CAST(:texts AS json))"
    "    AS t(h text, o int, n int, s json, v int, f bigint, b0 int, b1 int, b2 int, b3 int)"
    "), raw AS MATERIALIZED ("  # once: slices of bytes are cut by offset, slices of text by counting characters
    "  SELECT convert_to(CAST(:bodies AS text), 'UTF8') AS b"
    "), inserted AS ("
    "  INSERT INTO knowledge.canonical_texts (text_hash, body, byte_length, canonicaliser_version, simhash,"
    "    simhash_b0, simhash_b1, simhash_b2, simhash_b3)"
    "  SELECT h, convert_from(substring(raw.b FROM o + 1 FOR n), 'UTF8'), n, v, f, b0, b1, b2, b3"
    "  FROM texts, raw ON CONFLICT (text_hash) DO NOTHING RETURNING text_hash"
    "), spans AS ("
    "  INSERT INTO knowledge.text_spans (text_hash, ordinal, span_start, span_end, kind)"
    "  SELECT t.h, e.ordinal - 1, (e.span->>0)::int, (e.span->>1)::int, e.span->>2"
    "  FROM inserted JOIN texts t ON t.h = inserted.text_hash,"
    "  json_array_elements(t.s) WITH ORDINALITY AS e(span, ordinal)"
    ") SELECT count(*) FROM inserted"
)


class TextStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def store(self, items: Sequence[tuple[str, CanonicalText]]) -> int:
        """items: (snapshot_id, its canonical text). Identical text is stored once; returns how many were new."""
        if not items:
            return 0
        bodies = bytearray()
        texts: list[str] = []
        seen: set[str] = set()
        for _snapshot_id, text in items:
            if text.text_hash in seen:
                continue
            seen.add(text.text_hash)
            # Hex hashes and integers need no escaping; spans_json is JSON already.
            b0, b1, b2, b3 = bands(text.simhash)
            texts.append(f'{{"h":"{text.text_hash}","o":{len(bodies)},"n":{len(text.text)},"s":{text.spans_json},'
                         f'"v":{text.version},"f":{to_signed(text.simhash)},'
                         f'"b0":{b0},"b1":{b1},"b2":{b2},"b3":{b3}}}')
            bodies += text.text
        links = [{"i": snapshot_id, "h": text.text_hash} for snapshot_id, text in items]
        with self.engine.begin() as conn:
            conn.execute(_LINK, {"links": json.dumps(links)})
            new = conn.execute(_STORE, {"texts": "[" + ",".join(texts) + "]",
                                        "bodies": bodies.decode("utf-8")}).scalar_one()
        return int(new)


# A stored text as ingest had it: its UTF-8 bytes and its span ledger (what chunking reads), for a text
# indexed again from the database. ``t`` is knowledge.canonical_texts.
STORED_TEXT = ("t.text_hash, convert_to(t.body, 'UTF8'),"
               " (SELECT COALESCE(json_agg(json_build_array(sp.span_start, sp.span_end, CAST(sp.kind AS text))"
               "   ORDER BY sp.ordinal), '[]') FROM knowledge.text_spans sp WHERE sp.text_hash = t.text_hash)")


def stored_text(row: sa.Row) -> CanonicalText:
    """The CanonicalText of a row whose first three columns are STORED_TEXT's."""
    return CanonicalText(text_hash=row[0], text=bytes(row[1]), spans_json=json.dumps(row[2]))


def stored_texts(conn: Connection, text_hashes: Sequence[str]) -> dict[str, CanonicalText]:
    """Stored texts by hash (those the caller may read)."""
    rows = conn.execute(sa.text(f"SELECT {STORED_TEXT} FROM knowledge.canonical_texts t"
                                " WHERE t.text_hash = ANY(CAST(:h AS text[]))"), {"h": list(text_hashes)})
    return {row[0]: stored_text(row) for row in rows}
