"""The Cloud SQL path: the connector's Admin API requests (no emulator exists), and the shared role.

The real ``Connector`` is pointed at a loopback server standing in for sqladmin.googleapis.com;
the test records what it asks for when the engine opens its first connection: the instance's
connect settings and an ephemeral certificate carrying the caller's OAuth token, which is what
IAM database authentication sends. The server then refuses, so no connection is made.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import sqlalchemy as sa

from gleaner.errors import ConfigError
from gleaner.settings.config import Settings
from gleaner.store.backends import db


class AdminApiRecorder:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else {}
                path = self.path.split("?", 1)[0]
                recorder.requests.append((self.command, path, body))
                if path.endswith("/connectSettings"):  # enough for the connector to ask for a certificate
                    status, answer = 200, {"region": "europe-west1", "databaseVersion": "POSTGRES_16",
                                           "backendType": "SECOND_GEN", "serverCaCert": {"cert": "unused"},
                                           "ipAddresses": [{"type": "PRIMARY", "ipAddress": "127.0.0.1"}]}
                else:
                    status, answer = 403, {"error": {"code": 403, "message": "recorded, refused",
                                                     "status": "PERMISSION_DENIED"}}
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = _answer
            do_POST = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def admin_api() -> Iterator[AdminApiRecorder]:
    recorder = AdminApiRecorder()
    yield recorder
    recorder.server.shutdown()
    recorder.server.server_close()


def static_token_credentials() -> Any:
    """Credentials whose refresh yields a fixed token (what the metadata server would hand a function)."""
    import datetime

    from google.auth.credentials import Credentials

    class StaticToken(Credentials):
        def refresh(self, request: Any) -> None:
            self.token = "user-token"
            self.expiry = datetime.datetime.utcnow() + datetime.timedelta(hours=1)

    return StaticToken()


def test_the_connector_asks_for_an_iam_authenticated_ephemeral_certificate(admin_api):
    from google.cloud.sql.connector import Connector

    connector = Connector(credentials=static_token_credentials(), sqladmin_api_endpoint=admin_api.url,
                          refresh_strategy="lazy")
    settings = Settings(cloudsql_instance="proj:europe-west1:gleaner",
                        cloudsql_user="gl-sample@proj.iam", cloudsql_database="gleaner")
    engine = db.cloudsql_engine(settings, connector=connector)
    try:
        with pytest.raises(Exception, match=r"recorded, refused|403"), engine.connect():
            pass
    finally:
        engine.dispose()
        connector.close()
    paths = {(method, path) for method, path, _ in admin_api.requests}
    base = "/sql/v1beta4/projects/proj/instances/gleaner"
    assert ("GET", f"{base}/connectSettings") in paths
    (ephemeral,) = [body for method, path, body in admin_api.requests if path == f"{base}:generateEphemeralCert"]
    # IAM database authentication: the certificate request carries the caller's OAuth token.
    assert ephemeral["access_token"] == "user-token" and "BEGIN PUBLIC KEY" in ephemeral["public_key"]


def test_cloud_sql_without_a_user_is_a_configuration_error():
    with pytest.raises(ConfigError):
        db.cloudsql_engine(Settings(cloudsql_instance="proj:europe-west1:gleaner"))


def test_migrations_act_as_the_shared_role_and_the_application_as_gleaner_app(database_url):
    base = db.create_engine(Settings(database_url=database_url))
    admin = base.execution_options(gleaner_admin=True)
    with admin.begin() as conn:
        conn.execute(sa.text("CREATE ROLE gleaner_app_test NOLOGIN"))
        conn.execute(sa.text("GRANT gleaner_app_test TO CURRENT_USER"))
        # What terraform's db_bootstrap_sql grants: the role may create the knowledge schema.
        conn.execute(sa.text("DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO gleaner_app_test',"
                             " current_database()); END $$"))
        # What db_bootstrap_sql grants: the schema owner may switch to the application role.
        conn.execute(sa.text("GRANT gleaner_app TO gleaner_app_test"))
    try:
        engine = db.create_engine(Settings(database_url=database_url, database_role="gleaner_app_test"))
        with engine.connect().execution_options(gleaner_admin=True) as conn:  # as migrations connect
            assert conn.execute(sa.text("SELECT current_user")).scalar() == "gleaner_app_test"
            conn.execute(sa.text("CREATE SCHEMA role_owned"))
            conn.execute(sa.text("CREATE TABLE role_owned.t (x int)"))
            owner = conn.execute(sa.text("SELECT tableowner FROM pg_tables WHERE tablename = 't'"
                                         " AND schemaname = 'role_owned'"))
            assert owner.scalar() == "gleaner_app_test"
            conn.commit()
        with engine.begin() as conn:  # every other transaction
            assert conn.execute(sa.text("SELECT current_user")).scalar() == "gleaner_app"
        engine.dispose()
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text("DROP SCHEMA IF EXISTS role_owned CASCADE"))
            conn.execute(sa.text("DO $$ BEGIN EXECUTE format('REVOKE ALL ON DATABASE %I FROM gleaner_app_test',"
                                 " current_database()); END $$"))
            conn.execute(sa.text("REVOKE gleaner_app FROM gleaner_app_test"))
            conn.execute(sa.text("DROP ROLE gleaner_app_test"))
        base.dispose()


def test_a_role_name_that_is_not_an_identifier_is_refused(database_url):
    with pytest.raises(ConfigError):
        db.create_engine(Settings(database_url=database_url, database_role='x"; DROP TABLE y; --'))


def test_concurrent_first_requests_of_a_function_share_one_engine(database_url, tmp_path):
    """A function instance serving several requests at once builds its engine (and clients) once."""
    import threading

    from gleaner.app import Deps

    deps = Deps(Settings(database_url=database_url, data_dir=tmp_path))
    barrier = threading.Barrier(8)
    seen: list[object] = []

    def first_request() -> None:
        barrier.wait()
        seen.append(deps.metadata)

    threads = [threading.Thread(target=first_request) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(m) for m in seen}) == 1
    assert seen[0].engine is deps.engine  # type: ignore[attr-defined]
    deps.close()
