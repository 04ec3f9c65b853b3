"""site_waiters: the scrape batches waiting for their site's batch slot, so a finishing holder hands it on.

Revision ID: 0038
Revises: 0037
Create Date: 2026-12-02

A batch that finds its site's slots all taken goes back to the queue due at the holder's expected end
(0032). A holder that finishes sooner left its slot idle until then; now the waiting batch is also
written down here (``batch``: its encoded task, ``task``: that task's name), and the holder that gives
its slot back sends the oldest waiter's batch at once (``woken_at``: sent, so a second slot freed at the
same moment wakes the next one). The waiter's delayed task stays as the fallback (a holder that died);
whichever copy arrives first deletes the row and runs, the other finds it gone and does nothing. Not
tenant-scoped: politeness belongs to the server, whoever crawls it.
"""

from alembic import op

revision = "0038"
down_revision = "0037"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE knowledge.site_waiters (
            task text PRIMARY KEY,
            site text NOT NULL,
            batch bytea NOT NULL,
            queued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            woken_at timestamptz
        )
        """
    )
    op.execute("CREATE INDEX site_waiters_site_queued ON knowledge.site_waiters (site, queued_at)")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS knowledge.site_waiters")
