"""Notification channels and digests.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-01

- notify_subscriptions.digest_seconds: a subscription that asked for a digest (``--digest 1h|1d``)
  receives one message per period instead of one per event; NULL: one per event.
- notify_deliveries.digest_from / digest_until: a digest's period. Its delivery is created with the
  period's first event, keyed by (subscription, period start), and due at the period's end; its body
  stays '' (open) until its first attempt seals it with the period's events, in the transaction that
  claims it.
- notify_digest_items: the events a digest lists, one row per (subscription, event), so an event
  is in one digest of a subscription at most. Each row carries its event's site, and is under the
  tenant policy by it (an every-site digest lists several tenants' events).
"""

from alembic import op

from gleaner.store.access.rls import tenant_isolation_sql

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

ITEMS = "knowledge.notify_digest_items"


def upgrade() -> None:
    op.execute("""
ALTER TABLE knowledge.notify_subscriptions ADD COLUMN digest_seconds integer CHECK (digest_seconds > 0);
ALTER TABLE knowledge.notify_deliveries ADD COLUMN digest_from timestamptz, ADD COLUMN digest_until timestamptz;
CREATE TABLE knowledge.notify_digest_items (
    subscription_id uuid NOT NULL,
    event_id uuid NOT NULL,
    site_domain text NOT NULL,
    delivery_id uuid NOT NULL REFERENCES knowledge.notify_deliveries(id) ON DELETE CASCADE,
    event_seq bigint REFERENCES knowledge.document_events(seq) ON DELETE CASCADE,
    -- the event as a webhook's data carries it (the sealed digest lists these)
    body text NOT NULL,
    PRIMARY KEY (subscription_id, event_id)
);
CREATE INDEX notify_digest_items_delivery ON knowledge.notify_digest_items (delivery_id, event_seq);
""")
    op.execute(tenant_isolation_sql(ITEMS))


def downgrade() -> None:
    op.execute(f"DROP TABLE IF EXISTS {ITEMS}")
    op.execute("ALTER TABLE knowledge.notify_deliveries DROP COLUMN IF EXISTS digest_from,"
               " DROP COLUMN IF EXISTS digest_until")
    op.execute("ALTER TABLE knowledge.notify_subscriptions DROP COLUMN IF EXISTS digest_seconds")
