"""Run control: terminal statuses for stopped runs, a liveness record, a status for unstored pages.

Revision ID: 0004
Revises: 0009
Create Date: 2026-11-30

- crawl_status gains ``cancelled`` (the operator said stop) and ``interrupted`` (Ctrl-C, a crash
  settled by ``gleaner sweep``): a run always ends in a terminal status (DESIGN.md "Run control").
- crawl_runs gains ``heartbeat_at`` (the last time a stage worked on the run: how a sweep tells an
  idle run from a busy one) and ``worker`` (``host:pid:start`` of the local process driving it; NULL
  in the cloud, where only the heartbeat tells).
- fetch_outcome gains ``store-failed``: the page was fetched but its body could not be stored; it is
  settled for the run (never fetched again in it) and the run ends failed or partial.
- crawl_page_decisions gains the validators a fetch answered with: a page whose content changed gets
  them on its document only when the new version is committed, so a crash between scrape and snapshot
  cannot leave the new ETag beside the old version (the next run would get a 304 and lose the change).
"""

from alembic import op

revision = "0004"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # ADD VALUE may run inside the migration's transaction (PostgreSQL 12+) as long as nothing in
    # that transaction uses the new values; nothing below does.
    op.execute("ALTER TYPE knowledge.crawl_status ADD VALUE IF NOT EXISTS 'cancelled'")
    op.execute("ALTER TYPE knowledge.crawl_status ADD VALUE IF NOT EXISTS 'interrupted'")
    op.execute("ALTER TYPE knowledge.fetch_outcome ADD VALUE IF NOT EXISTS 'store-failed'")
    op.execute("ALTER TABLE knowledge.crawl_runs ADD COLUMN heartbeat_at timestamptz, ADD COLUMN worker text")
    op.execute("ALTER TABLE knowledge.crawl_page_decisions ADD COLUMN fetched_etag text,"
               " ADD COLUMN fetched_last_modified text")
    op.execute(
        "CREATE INDEX crawl_runs_unsettled ON knowledge.crawl_runs (heartbeat_at)"
        " WHERE status IN ('queued', 'mapping', 'mapped', 'sampling', 'scraping')"
    )


def downgrade() -> None:
    # Enum values cannot be dropped in PostgreSQL; the columns and the index can.
    op.execute("DROP INDEX IF EXISTS knowledge.crawl_runs_unsettled")
    op.execute("ALTER TABLE knowledge.crawl_page_decisions DROP COLUMN IF EXISTS fetched_etag,"
               " DROP COLUMN IF EXISTS fetched_last_modified")
    op.execute("ALTER TABLE knowledge.crawl_runs DROP COLUMN IF EXISTS worker, DROP COLUMN IF EXISTS heartbeat_at")
