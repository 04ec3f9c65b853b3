"""Data protection: fetched bodies and run artefacts expire; every table of tenant data is under RLS.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-01

- crawl_runs.bodies_discarded_at: when the run's fetched bodies (fetch-once) were deleted, which
  happens when the run settles (gleaner.stages.upkeep); upkeep finds the settled runs still
  holding bodies by it.
- crawl_runs.artefacts_expired_at: when the run's remaining artefacts expired
  (GLEANER_RUN_ARTEFACT_DAYS).
- snapshot_texts' foreign key to its text is checked at commit: ingest links first (store/documents/texts.py).
- Row-level security through the parent for the tables without a site_domain column
  (gleaner.store.access.rls.PARENT_POLICIES): a row is visible to a tenant exactly when its parent is.
"""

from alembic import op

from gleaner.store.access.rls import PARENT_POLICIES, parent_isolation_sql

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE knowledge.crawl_runs ADD COLUMN IF NOT EXISTS bodies_discarded_at timestamptz,"
               " ADD COLUMN IF NOT EXISTS artefacts_expired_at timestamptz")
    # Runs that ended before this revision: upkeep discards their bodies once, then never looks again.
    op.execute("CREATE INDEX IF NOT EXISTS crawl_runs_holding_bodies ON knowledge.crawl_runs (created_at)"
               " WHERE bodies_discarded_at IS NULL")
    # Ingest links a version to its text one statement before the text is inserted (store/documents/texts.py).
    op.execute("ALTER TABLE knowledge.snapshot_texts ALTER CONSTRAINT snapshot_texts_text_hash_fkey"
               " DEFERRABLE INITIALLY DEFERRED")
    for table in PARENT_POLICIES:
        op.execute(parent_isolation_sql(table))


def downgrade() -> None:
    for table in PARENT_POLICIES:
        for name in ("tenant_read", "tenant_insert", "tenant_update", "tenant_delete"):
            op.execute(f"DROP POLICY IF EXISTS {name} ON {table}")
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE knowledge.snapshot_texts ALTER CONSTRAINT snapshot_texts_text_hash_fkey"
               " NOT DEFERRABLE")
    op.execute("DROP INDEX IF EXISTS knowledge.crawl_runs_holding_bodies")
    op.execute("ALTER TABLE knowledge.crawl_runs DROP COLUMN IF EXISTS bodies_discarded_at,"
               " DROP COLUMN IF EXISTS artefacts_expired_at")
