"""The first deploy's database, rehearsed: bootstrap, migrate and a function's crawl on Cloud SQL's role layout.

Everything run here comes from the deployment's own text (tests/integration/deploy_rehearsal.py):
a change to terraform's bootstrap template or to cloudbuild.yaml's migrate step changes what runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from gleaner import tenancy
from gleaner.settings.config import Settings
from gleaner.store.access.rls import APP_ROLE
from gleaner.store.backends import db
from gleaner.store.backends.dberrors import DatabaseRefused

from ..generated_site import generated_site
from . import deploy_rehearsal as rehearsal

PAGES = 6


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rehearsal.Cluster]:
    """The cluster after the bootstrap SQL and the migrate step ran, as a person and the build run them."""
    tf = rehearsal.terraform()
    with rehearsal.cloudsql_like(tmp_path_factory.mktemp("cloudsql"), rehearsal.iam_users(tf)) as cluster:
        bootstrap = cluster.psql(rehearsal.ADMIN, rehearsal.bootstrap_sql(tf))
        assert bootstrap.returncode == 0, bootstrap.stderr
        migrated = rehearsal.run_migrate_step(cluster, rehearsal.migrate_step())
        assert migrated.returncode == 0, migrated.stderr[-3000:]
        yield cluster


def _function_settings(cluster: rehearsal.Cluster, function: str = "scrape") -> dict[str, str]:
    """What a function logs in as (its IAM user) and switches to (terraform's database_role)."""
    tf = rehearsal.terraform()
    env = tf["locals"]["common_env"]
    assert env["GLEANER_DATABASE_ROLE"] == "${var.database_role}" and env["GLEANER_AUTO_MIGRATE"] == "false"
    return {"GLEANER_DATABASE_URL": cluster.url(rehearsal.iam_users(tf)[function]),
            "GLEANER_DATABASE_ROLE": tf["variable"]["database_role"]["default"], "GLEANER_AUTO_MIGRATE": "false"}


def test_the_schema_reaches_head_owned_by_the_owner_role_not_the_admin(deployed):
    engine = db.create_engine(Settings(database_url=deployed.url(rehearsal.ADMIN)))
    try:
        with engine.connect().execution_options(gleaner_admin=True) as conn:
            owners = {r[0] for r in conn.execute(sa.text(
                "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'knowledge'"))}
            assert owners == {rehearsal.terraform()["variable"]["database_owner_role"]["default"]}
    finally:
        engine.dispose()
    function = db.create_engine(Settings.from_env(_function_settings(deployed)))
    try:
        assert db.current_revision(function) == db.head_revision()
    finally:
        function.dispose()


def test_a_function_crawls_as_its_iam_user_and_row_level_security_keeps_tenants_apart(deployed, tmp_path):
    function_env = _function_settings(deployed)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
    env.update(function_env, GLEANER_HOME=str(tmp_path / "home"), GLEANER_ALLOW_NETWORKS="127.0.0.0/8",
               GLEANER_HOST_DELAY="0", GLEANER_EXTRACT_WORKERS="1")
    with generated_site(PAGES) as site:
        crawl = subprocess.run([sys.executable, "-m", "gleaner.cli", "crawl", site.url + "/", "--json"], env=env,
                               capture_output=True, text=True, timeout=180, check=False)
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    summary = json.loads(crawl.stdout)
    assert summary["status"] == "finished", summary
    site_domain = summary["site_domain"]

    settings = Settings.from_env(function_env)
    engine = db.create_engine(settings)
    try:
        with tenancy.scope(site_domain), engine.connect() as conn:
            mine = conn.execute(sa.text("SELECT count(*) FROM knowledge.documents WHERE path LIKE '/p/%'")).scalar()
            assert mine == PAGES
            assert conn.execute(sa.text("SELECT current_user")).scalar() == APP_ROLE
        with tenancy.scope("other-tenant.example"), engine.connect() as conn:
            # Another tenant's transaction sees none of these rows, and cannot write one of them.
            assert conn.execute(sa.text("SELECT count(*) FROM knowledge.documents")).scalar() == 0
            assert conn.execute(sa.text("SELECT count(*) FROM knowledge.crawl_runs")).scalar() == 0
            with pytest.raises(DatabaseRefused, match="row-level security"):
                conn.execute(sa.text("INSERT INTO knowledge.sites (site_domain, target_url) VALUES (:s, :u)"),
                             {"s": site_domain, "u": site.url + "/"})
        # The function's role runs no DDL: the schema is the migrator's.
        with tenancy.scope("other-tenant.example"), engine.connect() as conn, \
                pytest.raises(DatabaseRefused, match="permission denied"):
            conn.execute(sa.text("CREATE TABLE knowledge.intruder (x int)"))
    finally:
        engine.dispose()


def test_the_rehearsal_fails_without_the_owner_in_the_application_role(tmp_path):
    """The 0011 blocker of issue 29: the owner cannot grant itself gleaner_app on Cloud SQL."""
    tf = rehearsal.terraform()
    sql = rehearsal.bootstrap_sql(tf)
    owner = tf["variable"]["database_owner_role"]["default"]
    broken = sql.replace(f"GRANT {APP_ROLE} TO {owner};", "")
    assert broken != sql
    with rehearsal.cloudsql_like(tmp_path / "pg", rehearsal.iam_users(tf)) as cluster:
        assert cluster.psql(rehearsal.ADMIN, broken).returncode == 0
        migrated = rehearsal.run_migrate_step(cluster, rehearsal.migrate_step())
    assert migrated.returncode != 0
    assert "permission denied to grant role" in migrated.stderr


def test_the_bootstrap_runs_once_in_one_script_in_order():
    tf = rehearsal.terraform()
    assert "db_tenancy_bootstrap_sql" not in tf["output"]
    sql = rehearsal.bootstrap_sql(tf)
    statements = [line for line in sql.splitlines() if line and not line.startswith("--")]
    creates = [i for i, s in enumerate(statements) if s.startswith("CREATE ROLE")]
    grants = [i for i, s in enumerate(statements) if s.startswith("GRANT")]
    assert creates and grants and max(creates) < min(grants)
    assert tf["variable"]["database_role"]["default"] == APP_ROLE  # the role the code switches to

