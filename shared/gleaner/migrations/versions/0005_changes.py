"""Keeping the copy: change events (an outbox), webhook subscriptions, deliveries and their attempts.

Revision ID: 0005
Revises: 0003
Create Date: 2026-11-30

- document_events: one row per new version and per status change (DESIGN.md "Change events").
  ``dedupe_key`` is the change's business identity (document, type, run, snapshots or cause), unique
  per tenant, so a redelivered message that reaches the same change inserts nothing. ``published_at``
  makes the table the outbox: rows are published on `documents-changed` after their commit.
- documents gains ``status_reason`` / ``status_changed_at`` (why a page is failed, stale, superseded).
- crawl_runs gains ``mapped_complete``: an unbounded mapping run (no limit hit, no include globs)
  may declare pages it no longer finds stale; a bounded one may not.
- notify_subscriptions / notify_deliveries / notify_attempts: Standard Webhooks subscriptions, one
  delivery per (subscription, event), and every attempt of it.
"""

from alembic import op

revision = "0005"
down_revision = "0003"
branch_labels = None
depends_on = None

EVENT_TYPES = ("document.new", "document.changed", "document.removed", "document.restored", "document.stale",
               "document.blocked", "document.unblocked")


def upgrade() -> None:
    types = ", ".join(f"'{t}'" for t in EVENT_TYPES)
    op.execute(f"CREATE TYPE knowledge.document_event_type AS ENUM ({types})")
    op.execute(
        """
        ALTER TABLE knowledge.documents ADD COLUMN status_reason text,
            ADD COLUMN status_changed_at timestamptz;
        ALTER TABLE knowledge.crawl_runs ADD COLUMN mapped_complete boolean NOT NULL DEFAULT false;

        CREATE TABLE knowledge.document_events (
            seq bigserial PRIMARY KEY,
            event_id uuid NOT NULL UNIQUE,
            site_domain text NOT NULL,
            dedupe_key text NOT NULL,
            type knowledge.document_event_type NOT NULL,
            document_id uuid NOT NULL REFERENCES knowledge.documents(id) ON DELETE CASCADE,
            url text,
            run_id uuid,
            version integer,
            snapshot_id uuid,
            content_hash text,
            previous_version integer,
            occurred_at timestamptz NOT NULL DEFAULT now(),
            published_at timestamptz,
            UNIQUE (site_domain, dedupe_key)
        );
        CREATE INDEX document_events_site_seq ON knowledge.document_events (site_domain, seq);
        CREATE INDEX document_events_unpublished ON knowledge.document_events (seq) WHERE published_at IS NULL;
        CREATE INDEX document_events_document ON knowledge.document_events (document_id, seq);

        CREATE TABLE knowledge.notify_subscriptions (
            id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            url text NOT NULL,
            site_domain text,
            types text[] NOT NULL DEFAULT '{}',
            -- The signing key must be read to sign, so it is stored as issued (whsec_...).
            secret text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            removed_at timestamptz
        );

        CREATE TABLE knowledge.notify_deliveries (
            id uuid PRIMARY KEY,
            subscription_id uuid NOT NULL REFERENCES knowledge.notify_subscriptions(id) ON DELETE CASCADE,
            event_id uuid NOT NULL,
            -- the event's seq, or NULL for a `notify test` message (which has no row in document_events)
            event_seq bigint REFERENCES knowledge.document_events(seq) ON DELETE CASCADE,
            body text NOT NULL,
            state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed', 'cancelled')),
            attempts integer NOT NULL DEFAULT 0,
            next_attempt_at timestamptz NOT NULL DEFAULT now(),
            scheduled boolean NOT NULL DEFAULT false,
            last_status integer,
            last_error text,
            created_at timestamptz NOT NULL DEFAULT now(),
            delivered_at timestamptz,
            UNIQUE (subscription_id, event_id)
        );
        CREATE INDEX notify_deliveries_due ON knowledge.notify_deliveries (next_attempt_at) WHERE state = 'pending';

        CREATE TABLE knowledge.notify_attempts (
            id bigserial PRIMARY KEY,
            delivery_id uuid NOT NULL REFERENCES knowledge.notify_deliveries(id) ON DELETE CASCADE,
            attempt integer NOT NULL,
            at timestamptz NOT NULL DEFAULT now(),
            http_status integer,
            error text,
            duration_ms integer NOT NULL DEFAULT 0
        );
        CREATE INDEX notify_attempts_delivery ON knowledge.notify_attempts (delivery_id, attempt);
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TABLE IF EXISTS knowledge.notify_attempts;
        DROP TABLE IF EXISTS knowledge.notify_deliveries;
        DROP TABLE IF EXISTS knowledge.notify_subscriptions;
        DROP TABLE IF EXISTS knowledge.document_events;
        DROP TYPE IF EXISTS knowledge.document_event_type;
        ALTER TABLE knowledge.crawl_runs DROP COLUMN IF EXISTS mapped_complete;
        ALTER TABLE knowledge.documents DROP COLUMN IF EXISTS status_reason, DROP COLUMN IF EXISTS status_changed_at;
        """
    )
