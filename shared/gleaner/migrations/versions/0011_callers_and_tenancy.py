"""caller_tokens: bearer tokens bound to a workspace, stored as SHA-256 digests.

Revision ID: 0011
Revises: 0003
Create Date: 2026-11-30

A token is 32 random bytes (``glt_`` + base64url), so a SHA-256 digest is enough to store it: no
salt or slow hash is needed against guessing, and the lookup is one index probe. The plaintext is
printed once by ``gleaner tokens add`` and never stored. Revoked tokens stay listed (who had access
when), ``revoked_at`` set.
"""

from alembic import op

revision = "0011"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE knowledge.caller_tokens (
            id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            workspace_id text NOT NULL CHECK (length(workspace_id) BETWEEN 1 AND 200),
            token_sha256 bytea NOT NULL UNIQUE CHECK (length(token_sha256) = 32),
            label text NOT NULL DEFAULT '',
            created_at timestamptz NOT NULL DEFAULT now(),
            revoked_at timestamptz
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS knowledge.caller_tokens")
