"""One kept site for every agent test: the demo site crawled once, served by `gleaner serve`.

Session-scoped (its own database cloned from the migrated template) so that the MCP, OpenAPI and
loader tests share one crawl instead of paying for one each.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa

from gleaner.app import Deps
from gleaner.bus.local import LocalBus
from gleaner.demosite.demo import demo_pages
from gleaner.demosite.testsite import TestSite
from gleaner.runtime.runner import crawl, new_request
from gleaner.serving.serve import WebhookServer
from tests.conftest import TEMPLATE_DB, _admin_engine, _with_database, test_settings

SITE = "demo.test"
OPERATOR_SECRET = "agents-operator-secret-0123456789abcdef"  # >= 32 characters, as Settings asks


@dataclass
class Served:
    deps: Deps
    site: TestSite
    server: WebhookServer
    run: dict[str, Any]
    database_url: str

    @property
    def url(self) -> str:
        return self.server.url

    def document_id(self, path: str) -> str:
        doc = self.deps.metadata.document_by_url(self.site.url + path)
        assert doc is not None
        return str(doc["id"])

    def current_text(self, path: str) -> Any:
        text = self.deps.provenance.current_text(self.document_id(path))
        assert text is not None
        return text


@pytest.fixture(scope="session")
def agents_database_url(pg_server_url: str, pg_template: str) -> Iterator[str]:
    name = "m_" + uuid.uuid4().hex[:12]
    admin = _admin_engine(pg_server_url)
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE_DB}"))
    yield _with_database(pg_server_url, name)
    with admin.connect() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


@pytest.fixture(scope="session")
def served(agents_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    settings = test_settings(tmp_path_factory.mktemp("agents"), agents_database_url, webhook_secret=OPERATOR_SECRET)
    deps = Deps(settings, bus_override=LocalBus(backoff_seconds=0.01))
    pages: dict[str, Any] = {}
    try:
        with TestSite(pages, max_seconds=300) as site:
            pages.update(demo_pages(site.url))
            run = crawl(deps, new_request(site.url + "/", site_domain=SITE))
            with WebhookServer(deps, port=0) as server:
                yield Served(deps, site, server, run, agents_database_url)
    finally:
        deps.close()
