"""The schema check every command makes at start reads the code's head from the migration files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from alembic.util import CommandError

from gleaner.store.backends import db


def test_the_head_read_from_the_migration_files_is_alembics_head():
    assert db.head_revision() == db.alembic_head_revision()
    assert db.head_revision() is not None


def test_two_heads_in_the_migration_files_are_refused_as_alembic_refuses_them(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch):
    copy = tmp_path / "migrations"
    shutil.copytree(db.MIGRATIONS_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    head = db.head_revision()
    (copy / "versions" / "9999_branch.py").write_text(
        f'revision = "9999"\ndown_revision = "{head}"\n\n\ndef upgrade() -> None:\n    pass\n')
    (copy / "versions" / "9998_branch.py").write_text(
        f'revision = "9998"\ndown_revision = "{head}"\n\n\ndef upgrade() -> None:\n    pass\n')
    monkeypatch.setattr(db, "MIGRATIONS_DIR", copy)
    with pytest.raises(CommandError):
        db.head_revision()


def test_a_new_migration_file_becomes_the_head(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    copy = tmp_path / "migrations"
    shutil.copytree(db.MIGRATIONS_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "versions" / "9999_next.py").write_text(
        f'revision: str = "9999"\ndown_revision: str | None = "{db.head_revision()}"\n\n\n'
        'def upgrade() -> None:\n    pass\n')
    monkeypatch.setattr(db, "MIGRATIONS_DIR", copy)
    assert db.head_revision() == db.alembic_head_revision() == "9999"
