"""Tenancy on every table: row-level security through a site_domain column or through the parent row.

Two tenants crawl two sites (versions, canonical texts, spans, ledger rows, robots, events), then
every table of the knowledge schema is read as tenant A and as tenant B: no row is visible to
both, and together they see everything. The /v1/texts read path answers a site token of A with
A's texts and 404 for B's, a workspace token with 404 for both (they are not references), and the
operator with both.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from gleaner import tenancy
from gleaner.demosite.testsite import Page, TestSite
from gleaner.runtime.runner import crawl, new_request
from gleaner.serving.webhook import WebhookRequest, handle
from gleaner.store.access.rls import GLOBAL_TABLES, OWNER_READ_TABLES, PARENT_POLICIES, POLICY

# Tables a tenant's crawl never writes or that belong to no tenant when written by the tests here.
_SHARED_ROWS = {"knowledge.canonical_texts", "knowledge.text_spans"}  # content-addressed: shared by design


def _tables(conn: sa.Connection) -> list[tuple[str, bool, bool, bool, set[str]]]:
    rows = conn.execute(sa.text(
        "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity,"
        " EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'site_domain'"
        "   AND NOT a.attisdropped),"
        " ARRAY(SELECT p.polname FROM pg_policy p WHERE p.polrelid = c.oid)"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'knowledge' AND c.relkind IN ('r', 'p') ORDER BY 1")).all()
    return [(f"knowledge.{r[0]}", bool(r[1]), bool(r[2]), bool(r[3]), set(r[4])) for r in rows]


def test_every_table_of_the_knowledge_schema_is_under_row_level_security_by_its_own_column_or_its_parent(deps):
    with deps.engine.connect() as conn:
        tables = _tables(conn)
    assert len(tables) > 25
    uncovered = []
    for name, enabled, forced, has_site, policies in tables:
        if name in GLOBAL_TABLES:
            continue
        own = has_site and POLICY in policies
        parent = name in PARENT_POLICIES and {"tenant_read", "tenant_insert", "tenant_update",
                                              "tenant_delete"} <= policies
        if not (enabled and (forced or name in OWNER_READ_TABLES) and (own or parent)):
            uncovered.append(name)
    assert uncovered == [], ("tenant data without row-level security: give the table a site_domain and "
                             f"tenant_isolation_sql, or a parent policy in gleaner.store.access.rls: {uncovered}")


def _page(title: str, words: str) -> Page:
    para = (f"{words} The committee met on Tuesday to discuss the ferry timetable and the repairs to the pier, "
            "and agreed to meet again after the harbour master has reported on the costs of the work.")
    return Page(f"<html><head><title>{title}</title></head><body><main><article><h1>{title}</h1>"
                f"<p>{para}</p><p>{para}</p></article></main></body></html>")


def _ctids(engine: sa.Engine, table: str) -> set[str]:
    with engine.connect() as conn:
        return {r[0] for r in conn.execute(sa.text(f"SELECT ctid::text FROM {table}"))}


def _text_of(deps: Any, site: str) -> str:
    with deps.engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT t.text_hash FROM knowledge.snapshot_texts t JOIN knowledge.document_snapshots s"
            " ON s.id = t.snapshot_id JOIN knowledge.documents d ON d.id = s.document_id"
            " WHERE d.site_domain = :s AND d.path = '/news' LIMIT 1"), {"s": site}).scalar_one()


def test_a_tenant_reads_none_of_another_tenants_rows_in_any_table_nor_its_texts(make_deps):
    deps = make_deps(webhook_secret="s3cret-operator")
    sites = {"alpha.test": {"/": _page("Alpha", "Alpha owls nest in the eastern tower."),
                            "/news": _page("Alpha news", "Alpha herons left the marsh early.")},
             "beta.test": {"/": _page("Beta", "Beta otters swim in the western canal."),
                           "/news": _page("Beta news", "Beta cranes returned to the river.")}}
    for site_domain, pages in sites.items():
        pages["/"] = Page(pages["/"].body.replace("</article>", "<a href='/news'>news</a></article>"))
        with TestSite(pages, max_seconds=120) as site:
            assert crawl(deps, new_request(site.url + "/", site_domain=site_domain))["status"] == "finished"

    with deps.engine.connect() as conn:
        tables = [name for name, *_ in _tables(conn) if name not in GLOBAL_TABLES]
    checked = []
    for table in tables:
        everything = _ctids(deps.engine, table)
        with tenancy.scope("alpha.test"):
            alpha = _ctids(deps.engine, table)
        with tenancy.scope("beta.test"):
            beta = _ctids(deps.engine, table)
        assert not alpha & beta or table in _SHARED_ROWS, f"{table}: rows visible to both tenants"
        if table == "knowledge.notify_subscriptions":
            continue  # none here; a subscription for every site is the operator's
        assert alpha | beta == everything, f"{table}: rows of a tenant that neither tenant sees"
        if alpha and beta:
            checked.append(table)
    # The tables a crawl writes were all seen, per tenant, with rows of each.
    assert {"knowledge.documents", "knowledge.document_snapshots", "knowledge.snapshot_texts",
            "knowledge.canonical_texts", "knowledge.text_spans", "knowledge.crawl_page_decisions",
            "knowledge.crawl_runs", "knowledge.document_events"} <= set(checked)

    alpha_text, beta_text = _text_of(deps, "alpha.test"), _text_of(deps, "beta.test")
    with tenancy.scope("alpha.test"):
        alpha_token = deps.tokens.add_site("alpha.test")["token"]
    with tenancy.all_tenants():
        workspace_token = deps.tokens.add("w1")["token"]

    def get(token: str, text_hash: str) -> int:
        request = WebhookRequest("GET", f"/v1/texts/{text_hash}", headers={"authorization": f"Bearer {token}"},
                                 query={"start": "0", "end": "5"})
        return handle(request, deps)[0]

    assert get(alpha_token, alpha_text) == 200
    assert get(alpha_token, beta_text) == 404
    assert get(workspace_token, alpha_text) == 404 and get(workspace_token, beta_text) == 404
    assert get("s3cret-operator", alpha_text) == 200 and get("s3cret-operator", beta_text) == 200
    assert get("gl_wrong", alpha_text) == 401


def test_every_policy_reads_the_tenant_once_per_statement_not_once_per_row(deps):
    """A scan under a policy compares each row with values read once per statement (init plans): a bare
    current_setting() in a policy was called again for every row, and a version's policy scans its
    documents, every tenant's, through a hashed subplan."""
    with deps.metadata.engine.connect() as conn:
        tables = [name for name, _on, _forced, _own, policies in _tables(conn) if policies]
        assert "knowledge.document_snapshots" in tables and "knowledge.documents" in tables
        # Made again by migration 0040, each as forced as before: search's chunks stay readable by their owner.
        assert all(not forced for name, _on, forced, _own, _p in _tables(conn) if name in OWNER_READ_TABLES)
        for table in tables:
            plan = "\n".join(r[0] for r in conn.execute(sa.text(f"EXPLAIN SELECT 1 FROM {table}")).all())
            assert "current_setting" not in plan, (table, plan)
            assert "InitPlan" in plan, (table, plan)
