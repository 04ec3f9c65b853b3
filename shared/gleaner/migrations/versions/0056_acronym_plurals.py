"""Search's words: an acronym's plural is its singular (CPUs is CPU), as BM25's stemmer reads it.

Revision ID: 0056
Revises: 0055
Create Date: 2026-12-05

PostgreSQL's English stemmer (Snowball's) leaves a word ending in "us" alone (status, bus, corpus), so
"CPUs" stayed ``cpus`` while "CPU" is ``cpu``: a question about "all CPU cores" did not find Sphinx's
``sphinx-build`` page, which says "CPUs" (the Porter stemmer of BM25 baselines such as SQLite FTS5
strips it). ``knowledge.search_words`` (migration 0051) now also drops the ``s`` that follows two
capitals, as in CPUs, GPUs, URLs and IDs, before ``to_tsvector``. Its separators (``. / : - @ ~``)
are unchanged, now replaced by the same ``regexp_replace`` (faster than ``translate`` on long texts).
Every stored chunk's ``tsv`` is made again and the table analysed, as 0051 did: on a large store this
rewrites every chunk row once (45,671 chunks of Rust's documentation: 22 s).
"""

from alembic import op

from gleaner.store.backends.db import earlier_migration

revision = "0056"
down_revision = "0055"
branch_labels = None
depends_on = None

WORDS_FUNCTION = r"""
CREATE OR REPLACE FUNCTION knowledge.search_words(t text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT pg_catalog.to_tsvector(CAST('pg_catalog.english' AS pg_catalog.regconfig),
                                  pg_catalog.regexp_replace(t, '[./:@~-]|(?<=[[:upper:]]{2})s\M', ' ', 'g'))
$fn$;
"""


def _remake(function: str) -> None:
    words = earlier_migration("0051_words_split_like_bm25.py")
    op.execute(function)
    op.execute(words._rebuild("knowledge.search_words({})"))
    op.execute("ANALYZE knowledge.text_chunks")


def upgrade() -> None:
    _remake(WORDS_FUNCTION)


def downgrade() -> None:
    _remake(earlier_migration("0051_words_split_like_bm25.py").WORDS_FUNCTION)
