"""When a run's counters were last recomputed from its ledger.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-30

A run's counters are recomputed from its ledger, never incremented (a redelivery cannot count twice).
Recomputing after every batch read the run's whole ledger each time: quadratic in the run, a tenth of a
second a batch at 100,000 pages. While a run scrapes they are now recomputed when older than a few
seconds, and always when it settles; this column says when they last were.
"""

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE knowledge.crawl_runs ADD COLUMN counted_at timestamptz")


def downgrade() -> None:
    op.execute("ALTER TABLE knowledge.crawl_runs DROP COLUMN counted_at")
