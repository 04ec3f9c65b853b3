"""Shared fixtures: a real PostgreSQL, a fresh migrated database per test, Deps for the stages.

PostgreSQL: ``GLEANER_TEST_DATABASE_URL`` (a server URL whose user may CREATE DATABASE) if set,
otherwise an embedded server started through pgserver for the session. Each test gets its
own database cloned from a migrated template, so tests never see each other's rows.
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import sqlalchemy as sa

from gleaner.app import Deps
from gleaner.bus.local import LocalBus
from gleaner.settings.config import Settings, default_pg_templates, parse_networks
from gleaner.store.backends import db

TEMPLATE_DB = "gleaner_template"


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM (a CI timeout, ``kill``, infra/dev.sh passing on a stop) ends the run as Ctrl-C does:
    session fixtures tear down, so the embedded PostgreSQL they started is stopped, not left running;
    and SIGINT is never left ignored for the processes tests start."""
    import signal

    def interrupt(_signo: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, interrupt)
    # A run started from a background job of a non-interactive shell (`nohup bash .ci/run &`) inherits
    # SIGINT ignored, which no shell `trap` can undo, and passes that on to every process it starts: a
    # `gleaner serve` a test stops with SIGINT would never stop. Handled here, it is the default again
    # in every child (an exec resets handled signals, never ignored ones).
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True, scope="session")
def _private_gleaner_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A safety net: a command a test forgets to point elsewhere writes here, never to the user's
    ~/.local/share/gleaner (or ~/.cache/gleaner). Tests that mean a place set GLEANER_HOME themselves.
    One exception: the static embedder's table (~/.cache/gleaner/models, GLEANER_MODEL_CACHE) is
    shared, as a user's would be: it is derived from the installed model alone, named by its SHA-256,
    and distilling it again would cost each test session a minute of CPU."""
    names = ("GLEANER_HOME", "GLEANER_PG_TEMPLATE_DIR")
    before = {name: os.environ.get(name) for name in names}
    os.environ["GLEANER_HOME"] = str(tmp_path_factory.mktemp("gleaner-home"))
    # New embedded data dirs copy one migrated cluster the session builds, not the user's cached one.
    os.environ["GLEANER_PG_TEMPLATE_DIR"] = str(tmp_path_factory.mktemp("pg-templates"))
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))


@pytest.fixture(scope="session")
def pg_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = os.environ.get("GLEANER_TEST_DATABASE_URL")
    if url:
        yield url
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        server = pgserver.get_server(tmp_path_factory.mktemp("pg"), cleanup_mode="stop")
    yield server.get_uri()
    server.cleanup()


def _admin_engine(url: str) -> sa.Engine:
    sa_url, connect_args = db._pg8000_url(url)
    return sa.create_engine(sa_url, connect_args=connect_args, isolation_level="AUTOCOMMIT")


@pytest.fixture(scope="session")
def pg_template(pg_server_url: str) -> str:
    admin = _admin_engine(pg_server_url)
    with admin.connect() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS {TEMPLATE_DB}"))
        conn.execute(sa.text(f"CREATE DATABASE {TEMPLATE_DB}"))
    template_url = _with_database(pg_server_url, TEMPLATE_DB)
    engine = db.create_engine(Settings(database_url=template_url))
    db.upgrade(engine)
    engine.dispose()
    admin.dispose()
    return template_url


@pytest.fixture
def database_url(pg_server_url: str, pg_template: str) -> Iterator[str]:
    """A fresh, migrated database for one test."""
    name = "t_" + uuid.uuid4().hex[:12]
    admin = _admin_engine(pg_server_url)
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE_DB}"))
    yield _with_database(pg_server_url, name)
    with admin.connect() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


def test_settings(tmp_path: Path, database_url: str | None = None, **overrides: Any) -> Settings:
    """Settings for tests: loopback allowed, politeness relaxed, extraction in-process."""
    base = Settings(
        data_dir=tmp_path / "gleaner",
        database_url=database_url,
        pg_template_dir=default_pg_templates(os.environ),
        allow_networks=parse_networks("127.0.0.0/8"),
        host_delay=0.0,
        host_concurrency=4,
        extract_workers=1,
        fetch_timeout=5.0,
    )
    return base.with_(**overrides) if overrides else base


test_settings.__test__ = False  # type: ignore[attr-defined]


@pytest.fixture(scope="session", autouse=True)
def operator_view() -> Iterator[None]:
    """Tests (and module fixtures) read the database as the operator does (every tenant); the code
    under test sets its own tenant (stages per message, the CLI per command), and isolation tests
    narrow it with tenancy.scope() or tenancy.no_tenant()."""
    from gleaner import tenancy

    with tenancy.all_tenants():
        yield


@pytest.fixture
def make_deps(tmp_path: Path, database_url: str) -> Iterator[Any]:
    """Factory: make_deps(**settings_overrides) -> Deps on this test's database and blob dir."""
    built: list[Deps] = []

    def factory(**overrides: Any) -> Deps:
        deps = Deps(test_settings(tmp_path, database_url, **overrides), bus_override=LocalBus(backoff_seconds=0.01))
        built.append(deps)
        return deps

    yield factory
    for deps in built:
        deps.close()


@pytest.fixture
def deps(make_deps: Any) -> Deps:
    return make_deps()


@pytest.fixture(scope="session")
def browser_renderer() -> Iterator[Any]:
    """One warm headless Chromium for the whole session (launched on its first page, stopped at the end)."""
    from gleaner.render.browser import BrowserRenderer
    from gleaner.render.gate import Limits

    renderer = BrowserRenderer(limits=Limits(seconds=4.0))
    yield renderer
    renderer.close()
