"""Cheaper writes per ingested page: texts uncompressed without lz4, no per-span key check, HOT ledger updates.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-30

- canonical_texts.body: a server built without lz4 (the embedded pgserver build) compresses every
  text above the TOAST threshold with pglz, on the ingest statement of every new page, and pglz was
  the largest single function of that server's CPU during a first crawl. There the column is stored
  out of line uncompressed (``STORAGE EXTERNAL``); the same text is on disk uncompressed anyway, as
  the version's content.md. Servers with lz4 keep compressing (0013): lz4 costs little.
- text_spans loses its foreign key to canonical_texts. Every span row (a page's text has dozens) ran
  the key check's own query against the text inserted by the same statement, a third of the server's
  CPU for that statement. Spans are inserted only by the statement that inserts their text (joined to
  the rows it inserted), and the one statement that deletes texts (store/documents/erasure.py) deletes their
  spans with them, as the cascade did.
- crawl_page_decisions: each ledger row is updated three or four times in a run (its batch, its
  fetch, its snapshot) and none of those updates touches an indexed column, yet almost none were HOT:
  a run's rows are inserted together, so their pages are full and each new row version went to
  another page with an entry in both indexes. A fill factor leaves room on the page (new pages only).
"""

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_NO_LZ4 = ("NOT EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression'"
           " AND 'lz4' = ANY(enumvals))")


def upgrade() -> None:
    op.execute(f"DO $$ BEGIN IF {_NO_LZ4} THEN"
               " ALTER TABLE knowledge.canonical_texts ALTER COLUMN body SET STORAGE EXTERNAL; END IF; END $$")
    op.execute("ALTER TABLE knowledge.text_spans DROP CONSTRAINT text_spans_text_hash_fkey")
    op.execute("ALTER TABLE knowledge.crawl_page_decisions SET (fillfactor = 70)")


def downgrade() -> None:
    op.execute("ALTER TABLE knowledge.crawl_page_decisions RESET (fillfactor)")
    op.execute("DELETE FROM knowledge.text_spans s WHERE NOT EXISTS"
               " (SELECT 1 FROM knowledge.canonical_texts c WHERE c.text_hash = s.text_hash)")
    op.execute("ALTER TABLE knowledge.text_spans ADD CONSTRAINT text_spans_text_hash_fkey FOREIGN KEY (text_hash)"
               " REFERENCES knowledge.canonical_texts (text_hash) ON DELETE CASCADE")
    op.execute("ALTER TABLE knowledge.canonical_texts ALTER COLUMN body SET STORAGE EXTENDED")
