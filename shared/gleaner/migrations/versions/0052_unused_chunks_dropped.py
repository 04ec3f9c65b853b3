"""Search's chunks: only of texts a document or composite is searched by.

Revision ID: 0052
Revises: 0051
Create Date: 2026-12-05

A text's chunks stayed in ``knowledge.text_chunks`` after its document left search or moved on to a
new version: a changed page's earlier versions, a blocked or unrouted page, and the aggregate pages
(a documentation book's print-all edition, Node.js's ``all.html``), which are chunked before they are
found to be aggregates. Search reads chunks whole through their indexes, so those took candidate
places in every search (half of the graph's nearest, when a print-all page doubles every chapter)
that the caller's documents then filtered out, and search had to look again over the visible texts
only. Ingest and every removal from the index now delete the chunks no index row holds any more
(gleaner.retrieval.index.drop_unused_chunks); this migration deletes those left from before, and
indexes ``composite_search_index`` by text, as ``search_index`` is, for that check.

Downgrade drops the index only: the deleted chunks were derived data, made again if their text is
searched by again.
"""

from alembic import op

revision = "0052"
down_revision = "0051"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX IF NOT EXISTS composite_search_index_text ON knowledge.composite_search_index (text_hash)")
    op.execute("DELETE FROM knowledge.text_chunks c"
               " WHERE NOT EXISTS (SELECT 1 FROM knowledge.search_index i WHERE i.text_hash = c.text_hash)"
               " AND NOT EXISTS (SELECT 1 FROM knowledge.composite_search_index i WHERE i.text_hash = c.text_hash)")
    op.execute("ANALYZE knowledge.text_chunks")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS knowledge.composite_search_index_text")
