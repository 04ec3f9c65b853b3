"""The language-model page decider: its cached answers, its per-run budget, and 'llm' as a decision source.

Revision ID: 0044
Revises: 0043
Create Date: 2026-12-05

``llm_answers`` keeps each answer by (input hash, model, prompt version), so a page sample asked once is
never asked again while neither the sample, the model nor the prompt changes (decide/pagedecider.py). It
is content-addressed like canonical_texts and holds no site name: a tenant reaches an answer only by
hashing the same input, so it is shared. ``llm_run_usage`` counts a run's calls and tokens against its
budget; one row per run, counters only, written under the row lock so concurrent workers of one run
share one budget.
"""

from alembic import op

revision = "0044"
down_revision = "0043"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # ADD VALUE cannot run inside a transaction block on PostgreSQL < 12; IF NOT EXISTS keeps it idempotent.
    op.execute("ALTER TYPE knowledge.decision_source ADD VALUE IF NOT EXISTS 'llm'")
    op.execute(
        """
        CREATE TABLE knowledge.llm_answers (
            input_hash text NOT NULL,
            model text NOT NULL,
            prompt_version text NOT NULL,
            answer jsonb NOT NULL,
            prompt_tokens integer NOT NULL DEFAULT 0,
            completion_tokens integer NOT NULL DEFAULT 0,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (input_hash, model, prompt_version)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE knowledge.llm_run_usage (
            run_id uuid PRIMARY KEY,
            calls integer NOT NULL DEFAULT 0,
            tokens bigint NOT NULL DEFAULT 0,
            refused integer NOT NULL DEFAULT 0
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS knowledge.llm_run_usage")
    op.execute("DROP TABLE IF EXISTS knowledge.llm_answers")
