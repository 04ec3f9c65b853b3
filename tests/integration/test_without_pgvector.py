"""A PostgreSQL without pgvector (an external server whose operator did not install it) takes every
migration and answers search by words alone.

Real components: Debian's PostgreSQL 15, which has no pgvector here (the embedded server has it, so
no other test sees this), a new cluster per module on a Unix socket, a loopback site.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from gleaner.app import Deps
from gleaner.bus.local import LocalBus
from gleaner.demosite.testsite import TestSite
from gleaner.retrieval import search
from gleaner.runtime.runner import crawl, new_request
from gleaner.store.backends import db
from tests.conftest import test_settings
from tests.integration.paraphrase_site import TOPICS, topic_pages

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _as_postgres(cmd: list[str]) -> None:
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []  # initdb refuses root
    done = subprocess.run(prefix + cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{cmd[0]} failed: {done.stderr[-2000:]}"


@pytest.fixture(scope="module")
def plain_server() -> Iterator[str]:
    """A new PostgreSQL 15 cluster without pgvector: its URL (over a Unix socket)."""
    if not (PG_BIN / "postgres").exists():
        if os.environ.get("CI") == "true":
            pytest.fail("Debian's PostgreSQL 15 is not installed (.ci/run installs it)")
        pytest.skip("Debian's PostgreSQL 15 is not installed")
    # Outside pytest's base directory, which only its owner may enter: the cluster runs as postgres.
    root = Path(tempfile.mkdtemp(prefix="gleaner-plainpg-"))
    root.chmod(0o777)
    data, sockets = root / "data", root / "sock"
    sockets.mkdir()
    sockets.chmod(0o777)
    user = "postgres" if os.geteuid() == 0 else os.environ.get("USER", "postgres")
    _as_postgres([str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", user, "--no-sync"])
    with (data / "postgresql.conf").open("a") as conf:
        conf.write(f"listen_addresses = ''\nunix_socket_directories = '{sockets}'\nfsync = off\n")
    _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-w", "-l", str(root / "log"), "start"])
    try:
        yield f"postgresql://{user}@/postgres?host={sockets}"
    finally:
        _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"])
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def plain_deps(plain_server: str, tmp_path: Path) -> Iterator[Deps]:
    settings = test_settings(tmp_path, plain_server)
    engine = db.create_engine(settings)
    db.upgrade(engine)  # what `gleaner db upgrade` runs (migration 0049 used to fail here without pgvector)
    engine.dispose()
    deps = Deps(settings, bus_override=LocalBus(backoff_seconds=0.01))
    yield deps
    deps.close()


def test_every_migration_applies_and_search_answers_by_words(plain_deps: Deps) -> None:
    deps = plain_deps
    with deps.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM pg_extension WHERE extname = 'vector'")).scalar() == 0
    assert db.current_revision(deps.engine) == db.head_revision()
    assert not deps.search_index.has_vectors()
    with TestSite(topic_pages(), max_seconds=120) as site:
        run = crawl(deps, new_request(site.url + "/", site_domain="topics.test"))
    assert run["status"] == "finished" and run["snapshots"]["new"] == len(TOPICS) + 1
    hits = search(deps, "molten magma from the crater", site_domain="topics.test")["results"]
    assert hits and hits[0]["url"].endswith("/volcanoes")
    assert all(h["embedding_score"] is None for h in hits)
