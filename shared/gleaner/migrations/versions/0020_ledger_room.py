"""Room on the run ledger's pages for every update of their rows (HOT updates).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-01

No index of ``crawl_page_decisions`` covers a column its updates change (the primary key is
(run_id, document_id), the other index document_id, neither partial), so an update is HOT whenever
the row's page has room for the new version. A row is inserted at about a quarter of its final
width (decision, fetch outcome, hashes, validators and snapshot come later), and scrape's snapshot
update changes a whole batch in one statement, so every row of a page needs room for a full-width
new version beside its old one at once: at 0019's fill factor of 70 about a third of the updates
left their page (a new version elsewhere, and an entry in both indexes for each). At 10, the least
PostgreSQL takes, a page holds about seven new rows, which stay on it through every update (the
pages end about half full). New pages only: existing rows stay where they are.
"""

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE knowledge.crawl_page_decisions SET (fillfactor = 10)")


def downgrade() -> None:
    op.execute("ALTER TABLE knowledge.crawl_page_decisions SET (fillfactor = 70)")
