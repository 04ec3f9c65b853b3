"""Ignore rules for volatile text: lines matching a pattern are left out of change detection.

Revision ID: 0028
Revises: 0019
Create Date: 2026-12-01

- rule_action gains ``ignore_text``; site_rules gains ``pattern`` (the regular expression such a rule
  matches lines with). One glob may carry several patterns, so the rule key becomes
  (site_domain, glob, action, pattern), with an absent pattern as ''.
"""

from alembic import op

revision = "0028"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TYPE knowledge.rule_action ADD VALUE IF NOT EXISTS 'ignore_text'")
    # The new enum value cannot be used in this transaction: the check compares the action as text.
    op.execute("""
ALTER TABLE knowledge.site_rules ADD COLUMN pattern text,
    ADD CONSTRAINT site_rules_pattern_for_ignore CHECK ((action::text = 'ignore_text') = (pattern IS NOT NULL)),
    DROP CONSTRAINT site_rules_site_domain_glob_action_key;
CREATE UNIQUE INDEX site_rules_key ON knowledge.site_rules (site_domain, glob, action, (COALESCE(pattern, '')));
""")


def downgrade() -> None:
    op.execute("""
DELETE FROM knowledge.site_rules WHERE pattern IS NOT NULL;
DROP INDEX knowledge.site_rules_key;
ALTER TABLE knowledge.site_rules DROP CONSTRAINT site_rules_pattern_for_ignore, DROP COLUMN pattern,
    ADD CONSTRAINT site_rules_site_domain_glob_action_key UNIQUE (site_domain, glob, action);
""")
