"""A run that kept none of the pages it discovered says so, in its end event as in its summary.

Revision ID: 0053
Revises: 0052
Create Date: 2026-12-05

Migration 0043's warning names a run that excluded at least 80 % of what it discovered. A run whose
pages were partly excluded and the rest failed (Debian's docutils documentation before XHTML pages
were read: 122 of 163 excluded as near-empty, the other 41 links broken) kept nothing and ended
"finished" with no warning. The run event (migration 0046's function) now also carries the words of
gleaner.operator.runwarnings.nothing_kept_warning when a finished or partial run kept no page,
fetched or confirmed unchanged, and the 80 % warning did not already speak.
"""

from alembic import op

from gleaner.store.backends.db import earlier_migration

revision = "0053"
down_revision = "0052"
branch_labels = None
depends_on = None

_ANCHOR = "    key := 'run:' || r.id::text || ':' || r.status::text;\n"
# Same words as gleaner.operator.runwarnings.nothing_kept_warning (a test holds them together).
_NOTHING_KEPT = """    IF r.urls_discovered > 0 AND r.urls_excluded * 100 < 80 * r.urls_discovered
       AND r.status::text IN ('finished', 'partial')
       AND COALESCE(r.urls_scraped, 0) + COALESCE(r.urls_not_modified, 0) = 0 THEN
        warnings := warnings || jsonb_build_array('kept none of the ' || r.urls_discovered
            || ' pages discovered: each was excluded, refused or failed; `gleaner runs ' || r.id::text
            || ' --urls` says why');
    END IF;
"""


def _replay_function() -> str:
    """Migration 0046's run event function (with replay_of)."""
    text = earlier_migration("0046_replay_in_run_events.py")._function(replay=True)
    assert text.count(_ANCHOR) == 1, "0046's run event function changed"
    return text


def upgrade() -> None:
    op.execute(_replay_function().replace(_ANCHOR, _NOTHING_KEPT + _ANCHOR))


def downgrade() -> None:
    op.execute(_replay_function())
