"""What a run starts: an unchanged recrawl starts no extraction process, and a new database is migrated once."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import uuid
from pathlib import Path

import sqlalchemy as sa

from gleaner.runtime.runner import crawl, new_request
from gleaner.settings.config import Settings
from gleaner.store.backends import db
from tests.conftest import _admin_engine, _with_database

from .sites import demo_site, set_version

SITE = "start.test"


def run(deps, site):
    return crawl(deps, new_request(site.url + "/", site_domain=SITE))


def test_an_unchanged_recrawl_starts_no_extraction_process(make_deps):
    with demo_site() as site:
        first_deps = make_deps(extract_workers=2)
        first = run(first_deps, site)
        assert first_deps.extract_pool.started
        first_deps.close()
        again_deps = make_deps(extract_workers=2)  # a new `gleaner crawl`: a new process, nothing started yet
        again = run(again_deps, site)
    assert first["snapshots"]["new"] == 13
    assert again["status"] == "finished"
    assert again["snapshots"] == {"new": 0, "changed": 0, "unchanged": 13}
    assert not again_deps.extract_pool.started
    assert multiprocessing.active_children() == []


# `gleaner crawl` in a process of its own, reporting at exit the modules it imported.
CRAWL_REPORTING_MODULES = """
import atexit, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))
import json
from gleaner.cli import main
main(["crawl", sys.argv[1], "--site-domain", sys.argv[2], "--json"])
"""


def test_an_unchanged_recrawl_imports_neither_the_extractor_nor_a_console_library(make_deps, tmp_path, database_url):
    with demo_site() as site:
        first_deps = make_deps()
        run(first_deps, site)
        first_deps.close()
        env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
        env.update(GLEANER_HOME=str(tmp_path / "gleaner"), GLEANER_DATABASE_URL=database_url,
                   GLEANER_ALLOW_NETWORKS="127.0.0.0/8", GLEANER_HOST_DELAY="0",
                   PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2] / "shared"),
                                               env.get("PYTHONPATH", "")]))
        again = subprocess.run([sys.executable, "-c", CRAWL_REPORTING_MODULES, site.url + "/", SITE], env=env,
                               capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout)["snapshots"] == {"new": 0, "changed": 0, "unchanged": 13}
    modules = set(json.loads(again.stderr.strip().splitlines()[-1]))
    assert "gleaner.stages.scrape" in modules
    assert not {"trafilatura", "pypdf", "rich", "pygments"} & modules


def test_a_first_crawl_extracts_its_samples_and_pages_in_the_extraction_processes_only(tmp_path, database_url):
    """The main process fetches and stores; trafilatura and pypdf are imported (and warmed) only where
    extraction runs, sample's pages included."""
    with demo_site() as site:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
        env.update(GLEANER_HOME=str(tmp_path / "gleaner"), GLEANER_DATABASE_URL=database_url,
                   GLEANER_ALLOW_NETWORKS="127.0.0.0/8", GLEANER_HOST_DELAY="0", GLEANER_EXTRACT_WORKERS="2",
                   PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2] / "shared"),
                                               env.get("PYTHONPATH", "")]))
        first = subprocess.run([sys.executable, "-c", CRAWL_REPORTING_MODULES, site.url + "/", SITE], env=env,
                               capture_output=True, text=True, timeout=180, check=False)
    assert first.returncode == 0, first.stderr[-2000:]
    summary = json.loads(first.stdout)
    assert summary["snapshots"]["new"] == 13 and summary["excluded"] > 0  # sample judged sections on their pages
    modules = set(json.loads(first.stderr.strip().splitlines()[-1]))
    assert "gleaner.stages.sample" in modules
    assert not {"trafilatura", "pypdf"} & modules


def test_a_recrawl_extracts_a_changed_page_in_the_extraction_processes_it_starts_then(make_deps):
    with demo_site() as site:
        first_deps = make_deps(extract_workers=2)
        run(first_deps, site)
        first_deps.close()
        set_version(site, "/docs/install")
        again_deps = make_deps(extract_workers=2)
        again = run(again_deps, site)
        started = again_deps.extract_pool.started
        again_deps.close()
    assert started
    assert again["status"] == "finished"
    assert again["snapshots"] == {"new": 0, "changed": 1, "unchanged": 12}


def test_a_new_database_is_migrated_to_the_head_and_a_current_one_is_left_as_it_is(pg_server_url):
    name = "t_new_" + uuid.uuid4().hex[:12]
    admin = _admin_engine(pg_server_url)
    with admin.connect() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    engine = db.create_engine(Settings(database_url=_with_database(pg_server_url, name)))
    try:
        assert db.current_revision(engine) is None
        db.ensure_schema(engine)
        assert db.current_revision(engine) == db.head_revision()
        with engine.connect() as conn:
            tables = conn.execute(sa.text("SELECT count(*) FROM pg_tables WHERE schemaname = 'knowledge'")).scalar()
        db.ensure_schema(engine)  # current: nothing to apply
        assert db.current_revision(engine) == db.head_revision()
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()
    assert tables and tables > 10
