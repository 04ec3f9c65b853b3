"""Whether an ``unavailable`` page was refused by Gleaner's own policy, as a column.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-30

The address policy's refusals (a non-public address, a URL Gleaner does not fetch) travel as
``unavailable`` (DESIGN.md's fetcher contract); the summary counts them as refused. That was told
from the wording of ``fetch_reason``; the fetcher's own flag is now recorded instead. Old rows are
backfilled from the wording the fetcher wrote.
"""

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE knowledge.crawl_page_decisions ADD COLUMN fetch_refused boolean NOT NULL DEFAULT false")
    op.execute("UPDATE knowledge.crawl_page_decisions SET fetch_refused = true WHERE fetch_outcome = 'unavailable'"
               " AND (starts_with(fetch_reason, 'non-public address') OR starts_with(fetch_reason, 'refused-url:'))")


def downgrade() -> None:
    op.execute("ALTER TABLE knowledge.crawl_page_decisions DROP COLUMN fetch_refused")
