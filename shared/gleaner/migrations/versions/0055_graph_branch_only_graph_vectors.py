"""The nearest vectors' graph branch reads only vectors in the graph.

Revision ID: 0055
Revises: 0054
Create Date: 2026-12-05

Search's ``knowledge.search_chunk_candidates`` (migration 0049) and the contradiction detector's
``knowledge.chunk_vector_candidates`` (migrations 0037 and 0050) take the graph's nearest as
``ORDER BY c.embedding <=> v LIMIT k`` over the chunks of the model. Where the planner reads the
table rather than the HNSW index (a small store, where every vector is still fresh and
``embedding`` is NULL), NULL distances sort last and the branch returned ``k`` arbitrary chunks, in
storage order: two crawls of the same pages then offered search different candidates (valgrind's
manual: 45 of 47 questions' meaning candidates differed between two fresh crawls; recall@1 0.68 on
one, 0.62 on the other). The branch now asks ``c.embedding IS NOT NULL``: the graph's vectors only,
which the index scan returned anyway (the graph holds no NULL), so the graph's answers are unchanged.
"""

from alembic import op

from gleaner.store.backends.db import earlier_migration

revision = "0055"
down_revision = "0054"
branch_labels = None
depends_on = None

_SEARCH_GRAPH = "WHERE hashes IS NULL AND c.embedding_model = model AND"
_DETECTOR_GRAPH = "WHERE hashes IS NULL AND c.embedding_model = model\n         ORDER BY c.embedding"
_ONLY_GRAPH = "c.embedding IS NOT NULL AND "


def _detector_0037() -> str:
    """Migration 0037's four-argument chunk_vector_candidates, as it created it."""
    text = earlier_migration("0037_fresh_vectors.py").UPGRADE
    start = text.index("CREATE OR REPLACE FUNCTION knowledge.chunk_vector_candidates(")
    return text[start:text.index("$fn$;", start) + len("$fn$;")]


def _statements(only_graph: bool) -> list[str]:
    search = earlier_migration("0049_search_functions_planned_once.py")
    detector = earlier_migration("0050_detector_fresh_picks.py")
    candidates, picks, four = search.CANDIDATES, detector.UPGRADE, _detector_0037()
    assert candidates.count(_SEARCH_GRAPH) == 1 and picks.count(_DETECTOR_GRAPH) == 1
    assert four.count(_DETECTOR_GRAPH) == 1, "an earlier candidate function changed"
    if only_graph:
        candidates = candidates.replace(_SEARCH_GRAPH, _SEARCH_GRAPH.replace("WHERE ", "WHERE " + _ONLY_GRAPH))
        picks = picks.replace(_DETECTOR_GRAPH, _DETECTOR_GRAPH.replace("WHERE ", "WHERE " + _ONLY_GRAPH))
        four = four.replace(_DETECTOR_GRAPH, _DETECTOR_GRAPH.replace("WHERE ", "WHERE " + _ONLY_GRAPH))
    # As 0049 installs the search function: only where pgvector and the function exist.
    search_sql = f"""
DO $$
BEGIN
    IF {search._HAS_VECTOR} THEN
        IF {search._HAS_CANDIDATES} THEN
            EXECUTE $sql${candidates}$sql$;
        END IF;
    END IF;
END
$$;
"""
    four_sql = f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'knowledge'
               AND table_name = 'text_chunks' AND column_name = 'fresh_embedding') THEN
        EXECUTE $sql${four}$sql$;
    END IF;
END
$$;
"""
    return [search_sql, picks, four_sql]


def upgrade() -> None:
    for statement in _statements(only_graph=True):
        op.execute(statement)


def downgrade() -> None:
    for statement in _statements(only_graph=False):
        op.execute(statement)
