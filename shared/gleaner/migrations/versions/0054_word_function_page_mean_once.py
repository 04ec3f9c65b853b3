"""Search's word function: the mean page length computed once, not once per page and word.

Revision ID: 0054
Revises: 0053
Create Date: 2026-12-05

A page's BM25 in ``knowledge.search_chunk_words`` (migrations 0041, 0049, 0051) normalises its length
by the mean length of the candidate pages, written as a subquery joined to every (page, word) row.
The planner, which expects a CTE of a few rows, put it on the inner side of a nested loop and
computed the mean again for every row: quadratic in the candidate pages. On a store of Rust's
documentation (45,671 chunks) a question whose words brought 1,410 candidate pages spent 312 of
its 373 ms there. The mean is now a materialised CTE of one row, read by every row; the answers are
the same, bit for bit (the same sums in the same order).
"""

from alembic import op

from gleaner.store.backends.db import earlier_migration

revision = "0054"
down_revision = "0053"
branch_labels = None
depends_on = None

_PER_ROW = "        CROSS JOIN (SELECT GREATEST(avg(texts.chunks), 1) AS mean FROM texts) m\n"
_ONCE = "        CROSS JOIN page_mean m\n"
_BEFORE_PAGE_TF = "    ), page_tf AS ("
_PAGE_MEAN = ("    ), page_mean AS MATERIALIZED (\n"
              "        SELECT GREATEST(avg(texts.chunks), 1) AS mean FROM texts\n"
              "    ), page_tf AS (")


def _word_function_0051() -> str:
    words = earlier_migration("0051_words_split_like_bm25.py")
    return words._word_function("unnest(knowledge.search_words(q))", words._EVERY_CHUNK_OF_A_RARER_WORD)


def upgrade() -> None:
    text = _word_function_0051()
    assert text.count(_PER_ROW) == 2 and text.count(_BEFORE_PAGE_TF) == 2, "0051's word function changed"
    op.execute(text.replace(_PER_ROW, _ONCE).replace(_BEFORE_PAGE_TF, _PAGE_MEAN))


def downgrade() -> None:
    op.execute(_word_function_0051())
