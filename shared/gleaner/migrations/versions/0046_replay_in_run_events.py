"""A replayed run's end event names the run it replayed.

Revision ID: 0046
Revises: 0045
Create Date: 2026-12-05

A replay fetches nothing: its pages are read from the store, yet its counters count them where a
crawl counts fetched pages. The run event (migration 0028's trigger) now carries ``replay_of`` for
a replay, so the change feed, the CLI and the back office say "replayed", not "fetched". It keeps
migration 0043's ``warnings`` (the same words as gleaner.operator.runwarnings).
"""

from alembic import op

revision = "0046"
down_revision = "0045"
branch_labels = None
depends_on = None


def _function(replay: bool) -> str:
    extra = (" || CASE WHEN r.options ? 'replay_of' THEN jsonb_build_object('replay_of', r.options->>'replay_of')"
             " ELSE '{}'::jsonb END") if replay else ""
    return f"""
CREATE OR REPLACE FUNCTION knowledge.record_run_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r knowledge.crawl_runs%ROWTYPE;
    key text;
    warnings jsonb := '[]'::jsonb;
BEGIN
    -- Deferred to commit: read the run as its transaction left it (counters recounted after the status).
    SELECT * INTO r FROM knowledge.crawl_runs WHERE id = NEW.id;
    IF NOT FOUND OR r.status::text NOT IN ('finished', 'partial', 'failed') THEN
        RETURN NULL;
    END IF;
    IF r.urls_discovered > 0 AND r.urls_excluded * 100 >= 80 * r.urls_discovered THEN
        warnings := jsonb_build_array('excluded ' || r.urls_excluded || ' of ' || r.urls_discovered
            || ' pages discovered (' || (r.urls_excluded * 100 / r.urls_discovered) || ' %): see '
            || '`gleaner review list ' || r.site_domain || '` and keep pages with `gleaner rules add '
            || r.site_domain || ' GLOB --include`');
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
                'error', r.error, 'target_url', r.target_url)
            || jsonb_build_object('warnings', warnings){extra},
            clock_timestamp())
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
"""


def upgrade() -> None:
    op.execute(_function(replay=True))


def downgrade() -> None:
    op.execute(_function(replay=False))
