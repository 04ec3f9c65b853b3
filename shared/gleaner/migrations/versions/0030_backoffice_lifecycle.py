"""Composites moved through their lifecycle by a named caller, with a history; subscriptions disabled.

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-01

- The ADR's ``validated_by_user_id`` is a user's uuid, but whoever validates in Gleaner is a
  credential, not a user: the operator, or a site token acting for its site. ``validated_by`` (text)
  names it ("operator", "site token <id> of <site>", "cli:<os user>"), beside ``validated_at``; the
  uuid column stays for a user directory later.
- ``composite_transitions``: every status change of a composite (from, to, who, when, an optional
  note), the operator's moves and Gleaner's own (a source changed: ``stale``) alike. Existing
  composites get one row for the status they hold now, by "before history".
- ``notify_subscriptions.status`` (``active`` | ``disabled``): a disabled subscription gets no new
  deliveries, its pending ones are cancelled and a retry refuses them, as for a removed one; enabling
  it receives events from then on. Removal stays ``removed_at``.
"""

from alembic import op

from gleaner.store.access.rls import tenant_isolation_sql

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
ALTER TABLE knowledge.composite_documents ADD COLUMN validated_by text;

CREATE TABLE knowledge.composite_transitions (
    id bigserial PRIMARY KEY,
    composite_document_id uuid NOT NULL REFERENCES knowledge.composite_documents(id) ON DELETE CASCADE,
    site_domain text NOT NULL,
    from_status knowledge.composite_status,
    to_status knowledge.composite_status NOT NULL,
    actor text NOT NULL CHECK (length(actor) BETWEEN 1 AND 300),
    note text CHECK (length(note) <= 2000),
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX composite_transitions_composite ON knowledge.composite_transitions (composite_document_id, id);

INSERT INTO knowledge.composite_transitions (composite_document_id, site_domain, from_status, to_status, actor, at)
SELECT id, site_domain, NULL, status, 'before history', created_at FROM knowledge.composite_documents;

CREATE TYPE knowledge.subscription_status AS ENUM ('active', 'disabled');
ALTER TABLE knowledge.notify_subscriptions
    ADD COLUMN status knowledge.subscription_status NOT NULL DEFAULT 'active',
    ADD COLUMN status_changed_at timestamptz;
""")
    op.execute(tenant_isolation_sql("knowledge.composite_transitions"))


def downgrade() -> None:
    op.execute("""
ALTER TABLE knowledge.notify_subscriptions DROP COLUMN IF EXISTS status_changed_at, DROP COLUMN IF EXISTS status;
DROP TYPE IF EXISTS knowledge.subscription_status;
DROP TABLE IF EXISTS knowledge.composite_transitions;
ALTER TABLE knowledge.composite_documents DROP COLUMN IF EXISTS validated_by;
""")
