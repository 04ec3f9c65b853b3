"""Row-level security: a transaction for tenant A cannot see or touch tenant B, even with B's ids."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from gleaner import tenancy
from gleaner.cli import main
from gleaner.store.access.rls import tenant_tables
from gleaner.store.backends.dberrors import DatabaseRefused
from gleaner.store.ledger.discovery import record_discovery
from gleaner.urls import path_of, url_hash


def seed(deps: Any, site: str) -> dict[str, str]:
    """One source host, run and document for site, written as that tenant."""
    meta = deps.metadata
    run_id = str(uuid.uuid4())
    url = f"https://{site}/secret-page"
    with tenancy.scope(site):
        host_id = meta.upsert_source_host(site, site, own_site=True)
        assert meta.create_run(run_id, site, host_id, f"https://{site}/", {}, "manual", "api")
        record_discovery(meta.engine, run_id, site, host_id, [(url, url_hash(url), path_of(url), "", 0, "link")])
        document_id = str(meta.document_by_url(url)["id"])
    return {"run_id": run_id, "url": url, "document_id": document_id}


@pytest.fixture
def two_tenants(deps: Any) -> tuple[dict[str, str], dict[str, str]]:
    return seed(deps, "a.test"), seed(deps, "b.test")


def count(engine: sa.Engine, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT count(*) FROM knowledge.{table}")).scalar_one())


def test_every_tenant_scoped_table_has_row_level_security_enabled_and_forced(deps):
    with deps.engine.connect() as conn:
        tables = tenant_tables(conn)
    assert {"documents", "crawl_runs", "source_hosts"} <= {name for name, _on, _forced in tables}
    missing = [name for name, enabled, forced in tables if not (enabled and forced)]
    assert missing == [], f"add op.execute(tenant_isolation_sql('knowledge.<table>')) for {missing}"


def test_application_transactions_run_as_the_non_owner_application_role(deps):
    with deps.engine.connect() as conn:
        role, bypass, owner = conn.execute(sa.text(
            "SELECT current_user, r.rolbypassrls, (SELECT tableowner FROM pg_tables"
            "  WHERE schemaname = 'knowledge' AND tablename = 'documents')"
            " FROM pg_roles r WHERE r.rolname = current_user")).one()
    assert role == "gleaner_app" and not bypass and owner != role


def test_a_tenant_cannot_read_another_tenants_rows_through_the_store_even_by_id(deps, two_tenants):
    a, b = two_tenants
    meta = deps.metadata
    with tenancy.scope("a.test"):
        assert meta.run_summary(b["run_id"]) is None
        assert meta.run_status(b["run_id"]) is None
        assert meta.document_by_url(b["url"]) is None
        assert meta.document_by_url(a["url"]) is not None
        assert meta.documents_tree("b.test") == []
        assert [r["run_id"] for r in meta.recent_runs()] == [a["run_id"]]
        assert count(deps.engine, "documents") == 1


def test_a_tenant_cannot_change_or_forge_another_tenants_rows(deps, two_tenants):
    _a, b = two_tenants
    with tenancy.scope("a.test"), deps.engine.begin() as conn:
        changed = conn.execute(sa.text("UPDATE knowledge.documents SET status = 'blocked' WHERE id = :d"),
                               {"d": b["document_id"]}).rowcount
        deleted = conn.execute(sa.text("DELETE FROM knowledge.crawl_runs WHERE id = :r"), {"r": b["run_id"]}).rowcount
    assert (changed, deleted) == (0, 0)
    with tenancy.scope("a.test"), pytest.raises(DatabaseRefused, match="row-level security"), \
            deps.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO knowledge.source_hosts (site_domain, host) VALUES ('b.test', 'evil')"))
    with tenancy.scope("b.test"):
        assert deps.metadata.run_status(b["run_id"]) is not None  # still there for its own tenant


def test_without_a_tenant_nothing_tenant_scoped_is_visible_or_writable(deps, two_tenants):
    with tenancy.no_tenant():  # as a request thread that chose no tenant
        assert count(deps.engine, "documents") == 0
        assert deps.metadata.recent_runs() == []
        with pytest.raises(DatabaseRefused, match="row-level security"):
            deps.metadata.upsert_source_host("c.test", "c.test", own_site=True)
    with tenancy.all_tenants():
        assert count(deps.engine, "documents") == 2


def test_the_cli_acting_as_one_tenant_sees_only_that_tenant(deps, two_tenants, database_url, tmp_path):
    a, b = two_tenants
    env = {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "g")}
    runner = CliRunner()
    as_a = runner.invoke(main, ["--tenant", "a.test", "runs", "--json"], env=env)
    assert as_a.exit_code == 0, as_a.output
    assert [r["run_id"] for r in json.loads(as_a.stdout)] == [a["run_id"]]
    forged = runner.invoke(main, ["--tenant", "a.test", "runs", b["run_id"]], env=env)
    assert forged.exit_code == 1 and "no run" in forged.stderr
    tree = runner.invoke(main, ["--tenant", "a.test", "docs", "b.test", "--json"], env=env)
    assert tree.exit_code == 1 and tree.stdout == "" and "no documents" in tree.stderr  # as if b.test were absent
    shown = runner.invoke(main, ["--tenant", "a.test", "show", b["url"]], env=env)
    assert shown.exit_code == 1 and "no document" in shown.stderr
    operator = runner.invoke(main, ["runs", "--json"], env=env)
    assert sorted(r["run_id"] for r in json.loads(operator.stdout)) == sorted([a["run_id"], b["run_id"]])
    bad = runner.invoke(main, ["--tenant", "_references", "runs"], env=env)
    assert bad.exit_code == 2


def test_an_http_route_sees_no_tenant_unless_it_chooses_one(make_deps, two_tenants):
    """A route mounted on `gleaner serve` (the back office's /v1/ will be one) runs on the server's threads,
    where no tenant is chosen: a forged id finds nothing until the route enters its caller's scope."""
    import httpx

    from gleaner.serving.serve import WebhookServer

    a, b = two_tenants
    deps = make_deps(webhook_secret="s")

    def documents(environ: Any, start_response: Any) -> list[bytes]:
        site = environ["QUERY_STRING"]
        meta = deps.metadata
        if site:
            with tenancy.scope(site):
                found = meta.document_by_url(b["url"])
        else:
            found = meta.document_by_url(b["url"])
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(found is not None).encode()]

    with WebhookServer(deps, port=0, routes=[("/v1/", documents)]) as server:
        seen = {site: httpx.get(f"{server.url}/v1/doc?{site}").json() for site in ("", "a.test", "b.test")}
    assert seen == {"": False, "a.test": False, "b.test": True}
    assert a["url"] != b["url"]
