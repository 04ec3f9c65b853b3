"""Word candidates scored as BM25: any word of the query, weighed by its rarity, saturated, length-normalised.

Revision ID: 0041
Revises: 0040
Create Date: 2026-12-05

``knowledge.search_chunk_words(q, per_term, df_cap, k1, b, per_text, top, hashes)`` is search's
lexical side (gleaner.retrieval.lexical), read as text_chunks' owner like 0033's function (under the
row policy the GIN index is unusable), returning keys and numbers, never text:

- the query's stemmed words (English configuration, as the chunks' ``tsv``);
- each word's document frequency: for a word ANALYZE lists among ``tsv``'s most common lexemes, its
  share of chunks times the table's size (``pg_stats``: reading a common word's posting list is the
  costliest part of a search, since a GIN scan cannot stop early); for any other word, the chunks
  holding it counted through the GIN index up to ``df_cap``; over every chunk whatever ``hashes``
  says, so that a small tenant's second pass and a composite's chunks weigh words as the first does;
- candidates: for each word, up to ``per_term`` chunks holding it (the GIN index), so a chunk holding
  any word may enter and a rare word's chunks all do; a word in ``df_cap`` chunks or more only when it
  is the query's rarest (a query of common words still finds chunks);
- each candidate's BM25: a word counts once when the chunk holds it, twice when its heading does
  (``setweight`` marks heading words 'A'): chunks are short (200 tokens at most), so presence is most
  of a word's frequency, and testing a ``tsv`` for a word is a binary search where reading its
  positions would unpack the whole vector; length is the chunk's lexemes against the candidates' mean;
- each candidate text's (page's) BM25: a word's frequency is the number of its chunks holding it,
  the length its chunks (the highest ordinal: one primary-key probe a text) against the candidate
  texts' mean; and ``coverage``, the share of the query's word weight (IDF) the page holds;
- returned: the ``per_text`` best chunks of each text among the ``top`` pages or holding one of the
  ``top`` chunks, each with its own and its page's scores, and ``query_weight`` (the most a chunk's
  BM25 can reach for this query).

Corpus size is ``reltuples`` (or a bounded count while the table is unanalysed, when there are no
common-lexeme statistics either).
"""

from alembic import op

revision = "0041"
down_revision = "0040"
branch_labels = None
depends_on = None

SIGNATURE = "knowledge.search_chunk_words(text, integer, integer, float8, float8, integer, integer, text[])"

UPGRADE = f"""
CREATE OR REPLACE FUNCTION knowledge.search_chunk_words(q text, per_term integer, df_cap integer, k1 float8,
                                                        b float8, per_text integer, top integer, hashes text[])
RETURNS TABLE (text_hash text, ordinal integer, chunk_start integer, chunk_end integer, chunk_score float8,
               page_score float8, coverage float8, query_weight float8)
LANGUAGE sql STABLE SECURITY DEFINER ROWS 300 SET search_path = pg_catalog, pg_temp AS $fn$
    WITH common AS MATERIALIZED (
        -- ANALYZE's most common lexemes of tsv, with the share of chunks holding each: a common word's
        -- document frequency without reading its posting list (a GIN scan cannot stop early).
        SELECT CAST(CAST(s.most_common_elems AS text) AS text[]) AS elems, s.most_common_elem_freqs AS freqs
        FROM pg_stats s WHERE s.schemaname = 'knowledge' AND s.tablename = 'text_chunks' AND s.attname = 'tsv'
    ), corpus AS MATERIALIZED (
        SELECT GREATEST(1, CASE WHEN t.reltuples > 0 THEN t.reltuples ELSE
                   (SELECT count(*) FROM (SELECT 1 FROM knowledge.text_chunks LIMIT 20000) x) END) AS n
        FROM pg_class t WHERE t.oid = CAST('knowledge.text_chunks' AS regclass)
    ), words AS MATERIALIZED (
        SELECT w.term, w.tq, w.heading,
               COALESCE(CAST(round((SELECT c.freqs[array_position(c.elems, w.term)] FROM common c) * corpus.n)
                             AS integer),
                        CAST((SELECT count(*) FROM (SELECT 1 FROM knowledge.text_chunks c
                              WHERE c.tsv @@ w.tq LIMIT df_cap) x) AS integer)) AS df
        FROM (SELECT u.lexeme AS term, CAST(quote_literal(u.lexeme) AS tsquery) AS tq,
                     CAST(quote_literal(u.lexeme) || chr(58) || 'A' AS tsquery) AS heading
              FROM unnest(to_tsvector('english', q)) u) w CROSS JOIN corpus
    ), weighted AS MATERIALIZED (
        -- Robertson's IDF with Lucene's "1 +": never below zero, however common the word. A word in no
        -- chunk weighs most: it counts against coverage and the query's weight.
        SELECT w.term, w.tq, w.heading, w.df, ln(1 + (corpus.n - w.df + 0.5) / (w.df + 0.5)) AS idf,
               row_number() OVER (ORDER BY w.df, w.term) AS rarity
        FROM words w CROSS JOIN corpus
    ), cand AS (
        -- Each word's chunks through the GIN index, but a common word's only when it is the query's
        -- rarest: reading a common word's posting list costs a search the most, for the least weight.
        SELECT DISTINCT ON (m.text_hash, m.ordinal) m.* FROM weighted w CROSS JOIN LATERAL (
            -- "|| ''": the vector read once here; a row with its vector is past TOAST's threshold, so
            -- tsv is stored apart, and each later test of it would fetch it again.
            SELECT c.text_hash, c.ordinal, c.chunk_start, c.chunk_end, c.tsv || CAST('' AS tsvector) AS tsv
            FROM knowledge.text_chunks c
            WHERE c.tsv @@ w.tq AND (hashes IS NULL OR c.text_hash = ANY(hashes)) LIMIT per_term) m
        WHERE w.df > 0 AND (w.df < df_cap OR w.rarity <= 1)
    ), mean AS (
        SELECT GREATEST(avg(length(cand.tsv)), 1) AS avgdl FROM cand
    ), scored AS MATERIALIZED (
        -- A word's frequency in a chunk: present, and present again in its heading (weight A).
        SELECT cand.text_hash, cand.ordinal, cand.chunk_start, cand.chunk_end, f.score, f.terms, f.tfs
        FROM cand CROSS JOIN mean CROSS JOIN LATERAL (
            SELECT sum(w.idf * x.tf * (k1 + 1) / (x.tf + k1 * (1 - b + b * length(cand.tsv) / mean.avgdl))) AS score,
                   array_agg(w.term) AS terms, array_agg(x.tf) AS tfs
            FROM weighted w CROSS JOIN LATERAL (SELECT 1 + CAST(cand.tsv @@ w.heading AS integer) AS tf) x
            WHERE cand.tsv @@ w.tq) f
    ), texts AS MATERIALIZED (
        SELECT d.text_hash, (SELECT max(c.ordinal) + 1 FROM knowledge.text_chunks c
                             WHERE c.text_hash = d.text_hash) AS chunks
        FROM (SELECT DISTINCT scored.text_hash FROM scored) d
    ), page_tf AS (
        SELECT s.text_hash, t.term, sum(t.tf) AS tf
        FROM scored s CROSS JOIN LATERAL unnest(s.terms, s.tfs) t(term, tf) GROUP BY s.text_hash, t.term
    ), pages AS (
        -- A page's BM25: its chunks holding each word, against its length in chunks.
        SELECT p.text_hash,
               sum(w.idf * p.tf * (k1 + 1) / (p.tf + k1 * (1 - b + b * t.chunks / m.mean))) AS page_score,
               sum(w.idf) / (SELECT sum(idf) FROM weighted) AS coverage
        FROM page_tf p JOIN weighted w ON w.term = p.term JOIN texts t ON t.text_hash = p.text_hash
        CROSS JOIN (SELECT GREATEST(avg(chunks), 1) AS mean FROM texts) m
        GROUP BY p.text_hash
    ), ranked AS (
        SELECT s.text_hash, s.ordinal, s.chunk_start, s.chunk_end, s.score, p.page_score, p.coverage,
               rank() OVER (ORDER BY s.score DESC) AS chunk_rank,
               rank() OVER (ORDER BY p.page_score DESC) AS page_rank,
               row_number() OVER (PARTITION BY s.text_hash ORDER BY s.score DESC, s.ordinal) AS in_text
        FROM scored s JOIN pages p ON p.text_hash = s.text_hash
    )
    SELECT r.text_hash, r.ordinal, r.chunk_start, r.chunk_end, r.score, r.page_score, r.coverage,
           (SELECT sum(idf) * (k1 + 1) FROM weighted)
    FROM ranked r WHERE r.in_text <= per_text AND (r.page_rank <= top OR r.chunk_rank <= top)
$fn$;
REVOKE ALL ON FUNCTION {SIGNATURE} FROM PUBLIC;
GRANT EXECUTE ON FUNCTION {SIGNATURE} TO gleaner_app;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(f"DROP FUNCTION IF EXISTS {SIGNATURE}")
