"""site_leases: how many scrape batches of one site may hold a function instance at once.

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-01

A site's politeness lets one request start per delay, however many batches of it are dispatched:
ten batches of one site in ten instances all wait for the same turn (knowledge.host_slots) and are
billed for it. One row per (site, slot), as many slots as the site's concurrency; a scrape task
takes a slot for its batch (gleaner.store.registry.siteleases) or is handed back to the queue until the
holder is expected to be done. ``expected_at`` is when the holder should finish (its pages times
the site's spacing); ``queued_until`` is when the batches already sent away to wait for this slot
should be done, so the next one waits behind them rather than all coming back at once;
``lease_until`` is when a holder that died lets go. Not tenant-scoped: politeness belongs to the
server, whoever crawls it.
"""

from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE knowledge.site_leases (
            site text NOT NULL,
            slot integer NOT NULL CHECK (slot >= 0),
            holder uuid,
            expected_at timestamptz,
            queued_until timestamptz,
            lease_until timestamptz,
            PRIMARY KEY (site, slot)
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS knowledge.site_leases")
