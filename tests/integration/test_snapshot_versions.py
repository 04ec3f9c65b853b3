"""Versions follow each other even when one message names a document more than once."""

from __future__ import annotations

from gleaner.store.ledger.records import SnapshotInput


def _page(document_id: str, content_hash: str) -> SnapshotInput:
    return SnapshotInput(document_id=document_id, content_hash=content_hash, raw_hash=content_hash,
                         content_key=f"k/{content_hash}", raw_key=None, fetch_status=200, fetch_time_ms=1,
                         byte_size=10, extractor="test")


def test_one_document_twice_in_a_message_gets_two_consecutive_versions_and_a_return_writes_none(deps):
    document_id = deps.references.upsert_document("https://example.com/a", "A", "page")
    meta = deps.metadata
    meta.apply_snapshots(None, [_page(document_id, "a" * 40), _page(document_id, "b" * 40)], {})
    (back,) = meta.apply_snapshots(None, [_page(document_id, "a" * 40)], {})
    assert back.outcome == "changed"
    with meta.engine.connect() as conn:
        import sqlalchemy as sa

        versions = conn.execute(sa.text("SELECT version, content_hash FROM knowledge.document_snapshots"
                                        " WHERE document_id = :d ORDER BY version"), {"d": document_id}).all()
    assert versions == [(1, "a" * 40), (2, "b" * 40)]
