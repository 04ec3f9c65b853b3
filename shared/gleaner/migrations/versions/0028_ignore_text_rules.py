"""Ignore rules for volatile text, and run events on the change feed.

Revision ID: 0028
Revises: 0024
Create Date: 2026-12-01

- rule_action gains ``ignore_text``; site_rules gains ``pattern`` (the regular expression such a rule
  matches lines with). One glob may carry several patterns, so the rule key becomes
  (site_domain, glob, action, pattern), with an absent pattern as ''.
- document_event_type gains run.finished, run.partial and run.failed; document_events.document_id may
  be null (a run event is about a run) and ``summary`` holds a run event's counters. A deferred
  trigger on crawl_runs records the event when a run's status becomes one of those: whatever settles
  the run (the last batch, run control, the sweep, a function in the cloud), in its transaction, at
  commit, so the summary has the counters the same transaction recounted. Its identity is
  (run, status): a redelivery that settles the run again records nothing.
"""

from alembic import op

revision = "0028"
down_revision = "0024"
branch_labels = None
depends_on = None

RUN_EVENT_STATUSES = ("finished", "partial", "failed")


def upgrade() -> None:
    op.execute("ALTER TYPE knowledge.rule_action ADD VALUE IF NOT EXISTS 'ignore_text'")
    # The new enum value cannot be used in this transaction: the check compares the action as text.
    op.execute("""
ALTER TABLE knowledge.site_rules ADD COLUMN pattern text,
    ADD CONSTRAINT site_rules_pattern_for_ignore CHECK ((action::text = 'ignore_text') = (pattern IS NOT NULL)),
    DROP CONSTRAINT site_rules_site_domain_glob_action_key;
CREATE UNIQUE INDEX site_rules_key ON knowledge.site_rules (site_domain, glob, action, (COALESCE(pattern, '')));
""")
    for status in RUN_EVENT_STATUSES:
        op.execute(f"ALTER TYPE knowledge.document_event_type ADD VALUE IF NOT EXISTS 'run.{status}'")
    op.execute("""
ALTER TABLE knowledge.document_events ALTER COLUMN document_id DROP NOT NULL, ADD COLUMN summary jsonb;

CREATE FUNCTION knowledge.record_run_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r knowledge.crawl_runs%ROWTYPE;
    key text;
BEGIN
    -- Deferred to commit: read the run as its transaction left it (counters recounted after the status).
    SELECT * INTO r FROM knowledge.crawl_runs WHERE id = NEW.id;
    IF NOT FOUND OR r.status::text NOT IN ('finished', 'partial', 'failed') THEN
        RETURN NULL;
    END IF;
    key := 'run:' || r.id::text || ':' || r.status::text;
    INSERT INTO knowledge.document_events (event_id, site_domain, dedupe_key, type, run_id, summary, occurred_at)
    VALUES (md5('event:' || key)::uuid, r.site_domain, key,
            CAST('run.' || r.status::text AS knowledge.document_event_type), r.id,
            jsonb_build_object('discovered', r.urls_discovered, 'included', r.urls_included,
                'excluded', r.urls_excluded, 'fetched', r.urls_scraped, 'not_modified', r.urls_not_modified,
                'refused', r.urls_refused, 'failed', r.urls_failed, 'limited', r.urls_limited,
                'snapshots', jsonb_build_object('new', r.snapshots_new, 'changed', r.snapshots_changed,
                                                'unchanged', r.snapshots_unchanged),
                'error', r.error, 'target_url', r.target_url),
            clock_timestamp())
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER crawl_runs_run_event AFTER UPDATE OF status ON knowledge.crawl_runs
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.status IS DISTINCT FROM OLD.status AND NEW.status::text IN ('finished', 'partial', 'failed'))
    EXECUTE FUNCTION knowledge.record_run_event();
""")


def downgrade() -> None:
    # Enum values stay (PostgreSQL cannot drop them); the rows that use them go.
    op.execute("""
DROP TRIGGER IF EXISTS crawl_runs_run_event ON knowledge.crawl_runs;
DROP FUNCTION IF EXISTS knowledge.record_run_event();
DELETE FROM knowledge.document_events WHERE document_id IS NULL;
ALTER TABLE knowledge.document_events DROP COLUMN summary, ALTER COLUMN document_id SET NOT NULL;
""")
    op.execute("""
DELETE FROM knowledge.site_rules WHERE pattern IS NOT NULL;
DROP INDEX knowledge.site_rules_key;
ALTER TABLE knowledge.site_rules DROP CONSTRAINT site_rules_pattern_for_ignore, DROP COLUMN pattern,
    ADD CONSTRAINT site_rules_site_domain_glob_action_key UNIQUE (site_domain, glob, action);
""")
