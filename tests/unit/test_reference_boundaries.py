"""Structural guards of the reference layer (seed 000 BI-1/BI-2/BI-7): no client-knowledge id from a URL."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "shared" / "gleaner"
MINTING_CI = re.compile(r"""uuid5\([^)]*["']ci:""")


def test_no_code_mints_a_client_knowledge_id_from_a_url():
    assert MINTING_CI.search('uuid.uuid5(NS, "ci:" + url)')  # the guard bites
    offenders = [str(p) for p in PACKAGE.rglob("*.py") if MINTING_CI.search(p.read_text("utf-8"))]
    assert offenders == []


def test_the_reference_tables_have_no_workspace_column():
    migration = (PACKAGE / "migrations" / "versions" / "0002_feed_references.py").read_text("utf-8")
    table = migration.split("CREATE TABLE knowledge.reference_items (", 1)[1].split(");", 1)[0]
    assert "workspace" not in table
