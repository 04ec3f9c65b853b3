"""Search's words: the words inside dotted names, paths and links are words of the page.

Revision ID: 0051
Revises: 0050
Create Date: 2026-12-05

PostgreSQL's parser reads ``fs.readFile``, ``/usr/lib/valgrind``, ``z/Architecture``, ``3.4.1`` and
every URL or e-mail address as one host, file, URL or version token, so the words inside them were
not words of the page, and a question naming them did not find it (valgrind's s390 README, which
BM25 ranks first for "running on IBM System z mainframes", has its only "IBM" and "z" in a link and
in ``z/Architecture``). BM25 baselines (SQLite FTS5's ``unicode61``, Lucene's standard tokenizer)
read those characters as separators.

``knowledge.search_words(text)`` is that reading: the characters that glue such tokens together
(``. / : - @ ~``) become spaces, then ``to_tsvector('english', …)`` as before (the same stemmer and
stop words). It is an inlinable SQL function, so ingest, the word function's query and this
migration share one definition. Ingest's chunk vectors (gleaner.retrieval.index) and the query's
words in ``knowledge.search_chunk_words`` (signature and grants unchanged) go through it; every
stored chunk's ``tsv`` is made again here, and the table analysed again (common words' counts come
from its statistics). On a large store this rewrites every chunk row once.

The word function also takes every chunk of a word held by fewer than ``df_cap`` chunks, not an
arbitrary ``per_term`` of them: a page's BM25 is summed over its candidate chunks, and which 200 of a
word's 500 chunks the index returned depended on the order pages were stored, so two crawls of the
same pages ranked differently; with every chunk, the word side answers the same for both. A common
word, searched only when it is the query's rarest, still brings ``per_term``.
"""

from alembic import op

from gleaner.store.backends.db import earlier_migration

revision = "0051"
down_revision = "0050"
branch_labels = None
depends_on = None

_QUERY_WORDS = "unnest(to_tsvector('english', q))"
_WORD_LIMIT = "LIMIT per_term) m"
# A word in fewer than df_cap chunks brings every one of them; only a common word (the query's rarest)
# is cut to per_term.
_EVERY_CHUNK_OF_A_RARER_WORD = "LIMIT CASE WHEN w.df < df_cap THEN df_cap ELSE per_term END) m"

WORDS_FUNCTION = """
CREATE OR REPLACE FUNCTION knowledge.search_words(t text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT pg_catalog.to_tsvector(CAST('pg_catalog.english' AS pg_catalog.regconfig),
                                  pg_catalog.translate(t, './:-@~', '      '))
$fn$;
GRANT EXECUTE ON FUNCTION knowledge.search_words(text) TO gleaner_app;
"""

_CHUNK_TEXT = ("convert_from(substring(convert_to(t.body, 'UTF8') FROM c.chunk_start + 1"
               " FOR c.chunk_end - c.chunk_start), 'UTF8')")


def _rebuild(words: str) -> str:
    """Every chunk's vector made again, ``words`` the call (``{}`` its text) that reads a text's words."""
    heading = words.format("COALESCE(c.heading, '')")
    return (f"UPDATE knowledge.text_chunks c SET tsv = setweight({heading}, 'A') || {words.format(_CHUNK_TEXT)}"
            " FROM knowledge.canonical_texts t WHERE t.text_hash = c.text_hash")


def _word_function(query_words: str, word_limit: str) -> str:
    """0049's word function, its query's lexemes read by ``query_words`` and each word's candidate
    chunks limited by ``word_limit``."""
    words = earlier_migration("0049_search_functions_planned_once.py").WORDS
    assert words.count(_QUERY_WORDS) == 2 and words.count(_WORD_LIMIT) == 2, "0049's word function changed"
    return words.replace(_QUERY_WORDS, query_words).replace(_WORD_LIMIT, word_limit)


def upgrade() -> None:
    op.execute(WORDS_FUNCTION)
    op.execute(_word_function("unnest(knowledge.search_words(q))", _EVERY_CHUNK_OF_A_RARER_WORD))
    op.execute(_rebuild("knowledge.search_words({})"))
    op.execute("ANALYZE knowledge.text_chunks")


def downgrade() -> None:
    op.execute(_word_function(_QUERY_WORDS, _WORD_LIMIT))
    op.execute(_rebuild("to_tsvector('english', {})"))
    op.execute("DROP FUNCTION knowledge.search_words(text)")
    op.execute("ANALYZE knowledge.text_chunks")
