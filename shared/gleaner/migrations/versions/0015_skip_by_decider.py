"""Who set a document's ``scrape_policy=skip``: a decider (re-decided each run) or a person.

Revision ID: 0015
Revises: 0012
Create Date: 2026-11-30

Until now the decider's skips were told apart by their ``skip_reason`` starting with ``rule: ``,
so a reason's wording decided whether the next run could lift the skip. The flag says it instead;
the reason stays what people read.
"""

from alembic import op

revision = "0015"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE knowledge.documents ADD COLUMN skip_by_decider boolean NOT NULL DEFAULT false")
    op.execute("UPDATE knowledge.documents SET skip_by_decider = true"
               " WHERE scrape_policy = 'skip' AND starts_with(skip_reason, 'rule: ')")


def downgrade() -> None:
    op.execute("ALTER TABLE knowledge.documents DROP COLUMN skip_by_decider")
