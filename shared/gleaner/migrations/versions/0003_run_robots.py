"""crawl_run_robots: one robots.txt decision per host per run, shared by every instance.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

On Cloud Functions a run's map, sample and scrape batches run in different instances; without a
shared record each would read robots.txt again (DESIGN.md: read once per host per run). The first
decision stored wins; later readers re-parse its body.
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE knowledge.crawl_run_robots (
            run_id uuid NOT NULL REFERENCES knowledge.crawl_runs(id) ON DELETE CASCADE,
            origin text NOT NULL,
            state text NOT NULL CHECK (state IN ('rules', 'none', 'unknown')),
            reason text NOT NULL DEFAULT '',
            body bytea,
            fetched_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (run_id, origin)
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS knowledge.crawl_run_robots")
