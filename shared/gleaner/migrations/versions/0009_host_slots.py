"""host_slots: per-host request turns shared by every process that fetches.

Revision ID: 0009
Revises: 0007
Create Date: 2026-11-30

Scrape batches of one site run in several function instances at once; in-process turns let each
of them hit the host at its own pace. One row per (host, slot) says when the next request to that
host may start and who holds the slot until when (a lease: a holder that dies lets go when it
expires). Claims are one short transaction (gleaner.store.registry.hostslots); no lock is held while the
request is in flight. Not tenant-scoped: politeness belongs to the server, whoever crawls it.
"""

from alembic import op

revision = "0009"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE knowledge.host_slots (
            host text NOT NULL,
            slot integer NOT NULL CHECK (slot >= 0),
            next_at timestamptz NOT NULL DEFAULT now(),
            holder uuid,
            lease_until timestamptz,
            PRIMARY KEY (host, slot)
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS knowledge.host_slots")
