"""Canonical texts and stored links are compressed with lz4 where the server supports it (migration 0013);
without lz4, canonical texts are stored uncompressed (migration 0019)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa


def compression_of(engine: sa.Engine, table: str, column: str) -> str:
    with engine.connect() as conn:
        return str(conn.execute(sa.text(
            "SELECT a.attcompression FROM pg_attribute a WHERE a.attrelid = CAST(:t AS regclass)"
            " AND a.attname = :c"), {"t": table, "c": column}).scalar_one())


def test_large_columns_use_lz4_exactly_where_the_server_has_it_texts_go_uncompressed_without_it(deps: Any) -> None:
    engine = deps.metadata.engine
    with engine.connect() as conn:
        lz4 = bool(conn.execute(sa.text(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'")).scalar_one())
    expected = "l" if lz4 else ""  # '' (the server's default, pglz) where lz4 is not built in
    assert compression_of(engine, "knowledge.canonical_texts", "body") == expected
    assert compression_of(engine, "knowledge.page_links", "links") == expected
    # A text large enough to be compressed reads back as written: lz4's, or uncompressed (0019).
    text = "a canonical text that repeats " * 2000
    with engine.begin() as conn:
        conn.execute(sa.text("SET LOCAL app.all_tenants = 'on'"))
        conn.execute(sa.text(
            "INSERT INTO knowledge.canonical_texts (text_hash, body, byte_length, canonicaliser_version)"
            " VALUES ('test-hash', :b, :n, 1)"), {"b": text, "n": len(text)})
    with engine.connect() as conn:
        body, method = conn.execute(sa.text(
            "SELECT body, pg_column_compression(body) FROM knowledge.canonical_texts"
            " WHERE text_hash = 'test-hash'")).one()
    assert body == text
    assert method == ("lz4" if lz4 else None)

