"""A new embedded data dir starts as a copy of one migrated cluster; anything odd falls back to initdb.

Each check runs in its own process (as a command does): the embedded server it starts stops when that
process exits, and pgserver's per-process state starts clean.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gleaner.store.backends import pgtemplate
from gleaner.store.backends.db import head_revision

# Start the data dir's database as every command does, then report what a user could check with psql.
OPEN = """
import json, os, sys
from pathlib import Path
import sqlalchemy as sa
from gleaner import tenancy
from gleaner.settings.config import Settings, default_pg_templates
from gleaner.store.backends import db
from gleaner.store.access.rls import ADMIN_OPTION
settings = Settings(data_dir=Path(sys.argv[1]), pg_template_dir=default_pg_templates(os.environ))
engine = db.create_engine(settings)
db.ensure_schema(engine)
with tenancy.all_tenants(), engine.connect().execution_options(**{ADMIN_OPTION: True}) as conn:
    system = conn.execute(sa.text("SELECT system_identifier FROM pg_control_system()")).scalar()
    revision = conn.execute(sa.text("SELECT version_num FROM knowledge.alembic_version")).scalar()
    conn.execute(sa.text("CREATE TABLE IF NOT EXISTS public.mine (n int)"))
    conn.execute(sa.text("INSERT INTO public.mine VALUES (1)"))
    rows = conn.execute(sa.text("SELECT count(*) FROM public.mine")).scalar()
    recycle = conn.execute(sa.text("SHOW wal_recycle")).scalar()
    conn.commit()
engine.dispose()
print(json.dumps({"system": str(system), "revision": revision, "rows": rows, "wal_recycle": recycle}))
"""


def open_data_dir(data_dir: Path, templates: Path | str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
    env["GLEANER_PG_TEMPLATE_DIR"] = str(templates)
    done = subprocess.run([sys.executable, "-c", OPEN, str(data_dir)], env=env, capture_output=True, text=True,
                          timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "stderr": done.stderr}


def test_new_data_dirs_are_copies_of_one_migrated_cluster_at_the_codes_head(tmp_path):
    templates = tmp_path / "templates"
    first = open_data_dir(tmp_path / "one", templates)
    second = open_data_dir(tmp_path / "two", templates)
    assert first["revision"] == second["revision"] == head_revision()
    # A spent WAL segment is unlinked, never renamed ahead with its bytes (what an erasure scrub relies on).
    assert first["wal_recycle"] == second["wal_recycle"] == "off"
    # One cluster copied twice: the same system identifier (initdb draws a new one every time).
    assert first["system"] == second["system"]
    assert [p.name for p in templates.iterdir() if not p.name.startswith(".")] == [pgtemplate.template_key()]
    # Each copy is its own database: what one holds, the other does not.
    assert open_data_dir(tmp_path / "one", templates)["rows"] == 2
    assert open_data_dir(tmp_path / "two", templates)["rows"] == 2


def test_with_templates_off_every_data_dir_runs_initdb(tmp_path):
    first = open_data_dir(tmp_path / "one", "off")
    second = open_data_dir(tmp_path / "two", "off")
    assert first["revision"] == second["revision"] == head_revision()
    assert first["wal_recycle"] == second["wal_recycle"] == "off"
    assert first["system"] != second["system"]


def test_a_cache_that_cannot_be_written_leaves_the_data_dir_to_initdb(tmp_path):
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache should be")
    opened = open_data_dir(tmp_path / "home", blocked / "templates")
    assert opened["revision"] == head_revision() and opened["rows"] == 1
    assert "running initdb" in opened["stderr"]


def test_a_copy_left_half_done_by_a_killed_process_is_cleared_and_the_data_dir_still_starts(tmp_path):
    templates = tmp_path / "templates"
    home = tmp_path / "home"
    (home / "pg").mkdir(parents=True)
    leftover = home / ".pg.seeding-killed"
    (leftover / "base").mkdir(parents=True)
    opened = open_data_dir(home, templates)
    assert opened["revision"] == head_revision() and opened["rows"] == 1
    assert not leftover.exists()


def test_a_data_dir_that_already_holds_a_cluster_is_never_overwritten(tmp_path):
    templates = tmp_path / "templates"
    home = tmp_path / "home"
    before = open_data_dir(home, "off")  # made by initdb, one row written
    after = open_data_dir(home, templates)  # the cache is there to use, and must not be
    assert after["system"] == before["system"] and after["rows"] == 2
    assert pgtemplate.seed(home / "pg", templates) is False


def test_a_change_to_the_migrations_asks_for_another_template(tmp_path, monkeypatch):
    migrations = tmp_path / "migrations"
    (migrations / "versions").mkdir(parents=True)
    for path in (pgtemplate.MIGRATIONS_DIR / "versions").glob("*.py"):
        (migrations / "versions" / path.name).write_bytes(path.read_bytes())
    (migrations / "env.py").write_bytes((pgtemplate.MIGRATIONS_DIR / "env.py").read_bytes())
    monkeypatch.setattr(pgtemplate, "MIGRATIONS_DIR", migrations)
    same = pgtemplate.template_key()
    with (migrations / "versions" / "0001_knowledge_core.py").open("a") as edited:
        edited.write("\n# an edit that keeps the revision id\n")
    assert pgtemplate.template_key() != same
