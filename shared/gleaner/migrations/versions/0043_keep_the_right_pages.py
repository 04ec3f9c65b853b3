"""Keeping the right pages: include rules, chained links, aggregate pages, a warning on mostly-excluded runs.

Revision ID: 0043
Revises: 0042
Create Date: 2026-12-05

- rule_action gains ``include``: ``rules add SITE GLOB --include`` forces matching pages in over every
  automatic verdict (the sample stage reads it; applying rules lifts a decider's skip it covers).
- page_links gains ``chain``: the rel next/prev links of a walked page, which a recrawl's 304 must
  still follow without spending depth (stages/mapwalk.py).
- documents gains ``is_aggregate``: a page whose text is largely its siblings' (a print-all edition);
  kept, but the search index leaves it out (retrieval/index.py).
- the run event's summary carries ``warnings`` (a run that excluded >= 80 % of what it discovered), the
  same words as the run summary (gleaner.operator.runwarnings).
"""

from alembic import op

revision = "0043"
down_revision = "0042"
branch_labels = None
depends_on = None

_EVENT = """
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
    {warning}
    key := 'run:' || r.id::text || ':' || r.status::text;
    INSERT INTO knowledge.document_events (event_id, site_domain, dedupe_key, type, run_id, summary, occurred_at)
    VALUES (md5('event:' || key)::uuid, r.site_domain, key,
            CAST('run.' || r.status::text AS knowledge.document_event_type), r.id,
            jsonb_build_object('discovered', r.urls_discovered, 'included', r.urls_included,
                'excluded', r.urls_excluded, 'fetched', r.urls_scraped, 'not_modified', r.urls_not_modified,
                'refused', r.urls_refused, 'failed', r.urls_failed, 'limited', r.urls_limited,
                'snapshots', jsonb_build_object('new', r.snapshots_new, 'changed', r.snapshots_changed,
                                                'unchanged', r.snapshots_unchanged),
                'error', r.error, 'target_url', r.target_url){more},
            clock_timestamp())
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
"""

# Same words as gleaner.operator.runwarnings.excluded_warning (a test holds them together).
_WARNING = """IF r.urls_discovered > 0 AND r.urls_excluded * 100 >= 80 * r.urls_discovered THEN
        warnings := jsonb_build_array('excluded ' || r.urls_excluded || ' of ' || r.urls_discovered
            || ' pages discovered (' || (r.urls_excluded * 100 / r.urls_discovered) || ' %): see '
            || '`gleaner review list ' || r.site_domain || '` and keep pages with `gleaner rules add '
            || r.site_domain || ' GLOB --include`');
    END IF;"""


def upgrade() -> None:
    op.execute("ALTER TYPE knowledge.rule_action ADD VALUE IF NOT EXISTS 'include'")
    op.execute("ALTER TABLE knowledge.page_links ADD COLUMN IF NOT EXISTS chain jsonb NOT NULL DEFAULT '[]'::jsonb")
    op.execute("ALTER TABLE knowledge.documents ADD COLUMN IF NOT EXISTS is_aggregate boolean NOT NULL DEFAULT false")
    op.execute(_EVENT.replace("{warning}", _WARNING).replace("{more}", " || jsonb_build_object('warnings', warnings)"))


def downgrade() -> None:
    # The enum value stays (PostgreSQL cannot drop one); the rules that use it go.
    op.execute("DELETE FROM knowledge.site_rules WHERE action::text = 'include'")
    op.execute("ALTER TABLE knowledge.page_links DROP COLUMN IF EXISTS chain")
    op.execute("ALTER TABLE knowledge.documents DROP COLUMN IF EXISTS is_aggregate")
    op.execute(_EVENT.replace("{warning}", "").replace("{more}", ""))
