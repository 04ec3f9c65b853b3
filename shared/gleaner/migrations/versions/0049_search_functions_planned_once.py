"""Search's two candidate functions in PL/pgSQL: planned once a session, each candidate's words read once.

Revision ID: 0049
Revises: 0047
Create Date: 2026-12-05

Migration 0041's ``search_chunk_words`` and 0042's ``search_chunk_candidates`` were SQL functions
with ``SET search_path`` and ``SECURITY DEFINER``: never inlined, so PostgreSQL planned their
statements anew at every call (the word function's dozen CTEs took longer to plan than to run on a
small site). As PL/pgSQL functions their statements are prepared once per session and their plans
cached (custom plans at first, a generic one once it is as cheap), with one statement for every
text and one for given texts (``hashes``), so that neither plan has to serve both.

The word function also reads each candidate's ``tsv`` once: the candidates' keys are gathered first
(the GIN index, per word, as before), then each distinct chunk's vector is fetched by its key, rather
than every (word, chunk) pair fetching it again (a real chunk's row carries its vector, so its ``tsv``
is in TOAST). Answers, signatures, privileges and ``search_path`` are unchanged.
"""

from alembic import op

revision = "0049"
down_revision = "0047"
branch_labels = None
depends_on = None

WORDS_SIGNATURE = "knowledge.search_chunk_words(text, integer, integer, float8, float8, integer, integer, text[])"
CANDIDATES_SIGNATURE = ("knowledge.search_chunk_candidates(tsquery, tsquery, public.vector, text, integer, integer,"
                        " text[], text[], integer[])")


def _words(scope: str) -> str:
    """The word function's statement over every text ("") or the given ones (a ``hashes`` condition)."""
    return f"""
    WITH common AS MATERIALIZED (
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
        SELECT w.term, w.tq, w.heading, w.df, ln(1 + (corpus.n - w.df + 0.5) / (w.df + 0.5)) AS idf,
               row_number() OVER (ORDER BY w.df, w.term) AS rarity
        FROM words w CROSS JOIN corpus
    ), keys AS MATERIALIZED (
        -- Each word's chunks through the GIN index (a common word's only when it is the query's rarest):
        -- keys only, each chunk once whatever the words it holds.
        SELECT DISTINCT m.text_hash, m.ordinal FROM weighted w CROSS JOIN LATERAL (
            SELECT c.text_hash, c.ordinal FROM knowledge.text_chunks c
            WHERE c.tsv @@ w.tq{scope} LIMIT per_term) m
        WHERE w.df > 0 AND (w.df < df_cap OR w.rarity <= 1)
    ), cand AS MATERIALIZED (
        -- "|| ''": each candidate's vector fetched (from TOAST) once, here, for every later test of it.
        SELECT c.text_hash, c.ordinal, c.chunk_start, c.chunk_end, c.tsv || CAST('' AS tsvector) AS tsv
        FROM keys k CROSS JOIN LATERAL (SELECT * FROM knowledge.text_chunks c
                                        WHERE c.text_hash = k.text_hash AND c.ordinal = k.ordinal OFFSET 0) c
    ), mean AS (
        SELECT GREATEST(avg(length(cand.tsv)), 1) AS avgdl FROM cand
    ), scored AS MATERIALIZED (
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
        SELECT p.text_hash,
               sum(w.idf * p.tf * (k1 + 1) / (p.tf + k1 * (1 - b + b * t.chunks / m.mean))) AS page_score,
               sum(w.idf) / (SELECT sum(weighted.idf) FROM weighted) AS coverage
        FROM page_tf p JOIN weighted w ON w.term = p.term JOIN texts t ON t.text_hash = p.text_hash
        CROSS JOIN (SELECT GREATEST(avg(texts.chunks), 1) AS mean FROM texts) m
        GROUP BY p.text_hash
    ), ranked AS (
        SELECT s.text_hash, s.ordinal, s.chunk_start, s.chunk_end, s.score, p.page_score, p.coverage,
               rank() OVER (ORDER BY s.score DESC) AS chunk_rank,
               rank() OVER (ORDER BY p.page_score DESC) AS page_rank,
               row_number() OVER (PARTITION BY s.text_hash ORDER BY s.score DESC, s.ordinal) AS in_text
        FROM scored s JOIN pages p ON p.text_hash = s.text_hash
    )
    SELECT r.text_hash, r.ordinal, r.chunk_start, r.chunk_end, CAST(r.score AS float8),
           CAST(r.page_score AS float8), CAST(r.coverage AS float8),
           CAST((SELECT sum(weighted.idf) * (k1 + 1) FROM weighted) AS float8)
    FROM ranked r WHERE r.in_text <= per_text AND (r.page_rank <= top OR r.chunk_rank <= top)"""


WORDS = f"""
CREATE OR REPLACE FUNCTION knowledge.search_chunk_words(q text, per_term integer, df_cap integer, k1 float8,
                                                        b float8, per_text integer, top integer, hashes text[])
RETURNS TABLE (text_hash text, ordinal integer, chunk_start integer, chunk_end integer, chunk_score float8,
               page_score float8, coverage float8, query_weight float8)
LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 300 SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
BEGIN
    IF hashes IS NULL THEN
        RETURN QUERY {_words("")};
    ELSE
        RETURN QUERY {_words(" AND c.text_hash = ANY(hashes)")};
    END IF;
END
$fn$;
REVOKE ALL ON FUNCTION {WORDS_SIGNATURE} FROM PUBLIC;
GRANT EXECUTE ON FUNCTION {WORDS_SIGNATURE} TO gleaner_app;
"""

_VECTOR = "COALESCE(c.embedding, c.fresh_embedding)"
# Whether the candidate function exists, asked only once pgvector's type is known: PostgreSQL 15's
# to_regprocedure raises, rather than answering NULL, when a type of the signature does not exist (a
# server without pgvector), so the type is looked up first, in an IF of its own.
_HAS_VECTOR = "pg_catalog.to_regtype('public.vector') IS NOT NULL"
_HAS_CANDIDATES = f"pg_catalog.to_regprocedure('{CANDIDATES_SIGNATURE}') IS NOT NULL"
_GRAPH_READY = ("COALESCE((SELECT i.indisvalid FROM pg_catalog.pg_index i"
                " WHERE i.indexrelid = pg_catalog.to_regclass('knowledge.text_chunks_embedding')), false)")

CANDIDATES = f"""
CREATE OR REPLACE FUNCTION knowledge.search_chunk_candidates(
    words tsquery, any_word tsquery, v public.vector, model text, k integer, cap integer, hashes text[],
    fresh_hashes text[], fresh_ordinals integer[])
RETURNS TABLE (text_hash text, ordinal integer, chunk_start integer, chunk_end integer,
               embedding_score double precision, fulltext_score double precision)
LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 150 SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
BEGIN
    -- The HNSW scan returns at most ef_search rows: set here, for the rest of the transaction.
    PERFORM set_config('hnsw.ef_search', CAST(GREATEST(k, 40) AS text), true);
    RETURN QUERY
    WITH near AS (
        (SELECT c.text_hash, c.ordinal FROM knowledge.text_chunks c
         WHERE hashes IS NULL AND c.embedding_model = model AND {_GRAPH_READY}
         ORDER BY c.embedding OPERATOR(public.<=>) v LIMIT k)
        UNION ALL
        (SELECT f.text_hash, f.ordinal FROM (
            SELECT c.text_hash, c.ordinal, {_VECTOR} AS e
            FROM unnest(fresh_hashes, fresh_ordinals) AS g(h, o)
            CROSS JOIN LATERAL (SELECT * FROM knowledge.text_chunks c
                                WHERE c.text_hash = g.h AND c.ordinal = g.o AND c.embedding_model = model
                                OFFSET 0) c) f
         WHERE hashes IS NULL AND fresh_hashes IS NOT NULL
         ORDER BY f.e OPERATOR(public.<=>) v LIMIT k)
        UNION ALL
        (SELECT c.text_hash, c.ordinal FROM knowledge.text_chunks c
         WHERE hashes IS NULL AND fresh_hashes IS NULL AND c.fresh_embedding IS NOT NULL
         AND c.embedding_model = model
         ORDER BY c.fresh_embedding OPERATOR(public.<=>) v LIMIT k)
        UNION ALL
        (SELECT c.text_hash, c.ordinal FROM knowledge.text_chunks c
         WHERE hashes IS NOT NULL AND c.text_hash = ANY(hashes) AND c.embedding_model = model
         ORDER BY {_VECTOR} OPERATOR(public.<=>) v LIMIT k)
    ), matched AS (
        SELECT m.text_hash, m.ordinal FROM (
            SELECT c.text_hash, c.ordinal, c.tsv FROM knowledge.text_chunks c
            WHERE c.tsv @@ words AND (hashes IS NULL OR c.text_hash = ANY(hashes)) LIMIT cap) m
        ORDER BY ts_rank_cd(m.tsv, words, 32) DESC LIMIT k
    ), keys AS (
        SELECT * FROM near UNION SELECT * FROM matched
    )
    SELECT s.* FROM keys CROSS JOIN LATERAL (
        SELECT c.text_hash, c.ordinal, c.chunk_start, c.chunk_end,
               CAST(CASE WHEN c.embedding_model = model
                    THEN GREATEST(0, 1 - ({_VECTOR} OPERATOR(public.<=>) v)) ELSE 0 END AS float8),
               CAST(COALESCE(ts_rank_cd(c.tsv, any_word, 32), 0) AS float8)
        FROM knowledge.text_chunks c WHERE c.text_hash = keys.text_hash AND c.ordinal = keys.ordinal OFFSET 0) s;
END
$fn$;
"""

UPGRADE = f"""
{WORDS}
DO $$
BEGIN
    IF {_HAS_VECTOR} THEN
        IF {_HAS_CANDIDATES} THEN
            EXECUTE $sql${CANDIDATES}$sql$;
            EXECUTE 'REVOKE ALL ON FUNCTION {CANDIDATES_SIGNATURE} FROM PUBLIC';
            EXECUTE 'GRANT EXECUTE ON FUNCTION {CANDIDATES_SIGNATURE} TO gleaner_app';
        END IF;
    END IF;
END
$$;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    import importlib.util
    from pathlib import Path

    def earlier(name: str):  # type: ignore[no-untyped-def]
        spec = importlib.util.spec_from_file_location(f"_gleaner_migration_{name[:4]}", Path(__file__).with_name(name))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    # 0041's and 0042's texts again (CREATE OR REPLACE, with their grants).
    op.execute(earlier("0041_search_bm25_words.py").UPGRADE)
    candidates = earlier("0042_fresh_segments.py")
    op.execute(f"""
DO $$
BEGIN
    IF {_HAS_VECTOR} THEN
        IF {_HAS_CANDIDATES} THEN
            EXECUTE $sql${candidates.CANDIDATES}$sql$;
            EXECUTE 'REVOKE ALL ON FUNCTION {CANDIDATES_SIGNATURE} FROM PUBLIC';
            EXECUTE 'GRANT EXECUTE ON FUNCTION {CANDIDATES_SIGNATURE} TO gleaner_app';
        END IF;
    END IF;
END
$$;
""")
