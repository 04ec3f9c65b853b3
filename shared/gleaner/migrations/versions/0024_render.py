"""A site's render mode: never | auto | always (gleaner.render.modes).

Revision ID: 0024
Revises: 0022
Create Date: 2026-12-01

Scheduled runs of a site read it like its other settings (sites add --render); a crawl's own
--render wins. Existing sites keep reading plainly.
"""

from alembic import op

revision = "0024"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE knowledge.sites ADD COLUMN IF NOT EXISTS render text NOT NULL DEFAULT 'never'"
               " CONSTRAINT sites_render_mode CHECK (render IN ('never', 'auto', 'always'))")


def downgrade() -> None:
    op.execute("ALTER TABLE knowledge.sites DROP COLUMN IF EXISTS render")
