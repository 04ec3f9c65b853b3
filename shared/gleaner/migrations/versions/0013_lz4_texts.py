"""Large columns compressed with lz4 where the server has it, pglz (PostgreSQL's default) where it has not.

Revision ID: 0013
Revises: 0008
Create Date: 2026-11-30

canonical_texts.body (every ingested page's canonical text) and page_links.links (a page's links as
last read) are the columns whose values are large enough for TOAST to compress. lz4 compresses and
decompresses several times faster than pglz at a similar ratio. Servers built without lz4 (the
embedded pgserver build) list no 'lz4' among default_toast_compression's values: there nothing
changes. Only values written from now on are compressed the new way; old ones stay readable.
"""

from alembic import op

revision = "0013"
down_revision = "0008"
branch_labels = None
depends_on = None

_COLUMNS = (("knowledge.canonical_texts", "body"), ("knowledge.page_links", "links"))


def _set(method: str, only_if_supported: bool) -> None:
    statements = " ".join(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION {method};"
                          for table, column in _COLUMNS)
    condition = ("EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression'"
                 " AND 'lz4' = ANY(enumvals))") if only_if_supported else "true"
    op.execute(f"DO $$ BEGIN IF {condition} THEN {statements} END IF; END $$")


def upgrade() -> None:
    _set("lz4", only_if_supported=True)


def downgrade() -> None:
    _set("default", only_if_supported=False)
