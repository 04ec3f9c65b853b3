"""Render modes: a site's (never | auto | always), and rules that set one for matching paths.

Revision ID: 0024
Revises: 0022
Create Date: 2026-12-01

Scheduled runs of a site read it like its other settings (sites add --render); a crawl's own
--render wins. Existing sites keep reading plainly. ``rules add SITE GLOB --render MODE`` stores
rule actions render_never | render_auto | render_always: for matching paths they outrank the run's
mode (gleaner.render.modes.mode_for); they are not gates, so applying rules ignores them.
"""

from alembic import op

revision = "0024"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # ADD VALUE may run inside the migration's transaction (PostgreSQL 12+): nothing here uses the values.
    for value in ("render_never", "render_auto", "render_always"):
        op.execute(f"ALTER TYPE knowledge.rule_action ADD VALUE IF NOT EXISTS '{value}'")
    op.execute("ALTER TABLE knowledge.sites ADD COLUMN IF NOT EXISTS render text NOT NULL DEFAULT 'never'"
               " CONSTRAINT sites_render_mode CHECK (render IN ('never', 'auto', 'always'))")


def downgrade() -> None:
    # Enum values cannot be dropped; the render rules themselves go.
    op.execute("DELETE FROM knowledge.site_rules WHERE action::text LIKE 'render_%'")
    op.execute("ALTER TABLE knowledge.sites DROP COLUMN IF EXISTS render")
