"""The back office on the ingest function's HTTP trigger, loaded as Cloud Functions loads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from functions_framework import create_app

from gleaner import app as gleaner_app

ROOT = Path(__file__).resolve().parents[2]


def ingest_client(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, database_url: str, secret: str | None):
    monkeypatch.setenv("GLEANER_DATABASE_URL", database_url)
    monkeypatch.setenv("GLEANER_DATA_DIR", str(tmp_path / "gleaner"))
    if secret:
        monkeypatch.setenv("GLEANER_WEBHOOK_SECRET", secret)
    else:
        monkeypatch.delenv("GLEANER_WEBHOOK_SECRET", raising=False)
    gleaner_app.reset_process_deps()
    return create_app(target="on_http", source=str(ROOT / "functions" / "ingest" / "main.py")).test_client()


def test_the_ingest_function_serves_the_back_office_only_with_the_admin_bearer(monkeypatch, tmp_path, database_url):
    client = ingest_client(monkeypatch, tmp_path, database_url, "fn-secret")
    try:
        assert client.get("/v1/sites").status_code == 401
        assert client.get("/v1/runs", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert client.get("/ui/").headers["Location"].endswith("/ui/login")
        answer = client.get("/v1/sites", headers={"Authorization": "Bearer fn-secret"})
        assert answer.status_code == 200 and answer.get_json() == {"sites": []}
        page = client.get("/ui/", headers={"Authorization": "Bearer fn-secret"})
        assert page.status_code == 200 and b"nothing kept yet" in page.data
        assert page.headers["Content-Type"].startswith("text/html")
    finally:
        gleaner_app.reset_process_deps()


def test_without_a_configured_secret_the_function_refuses_the_back_office(monkeypatch, tmp_path, database_url):
    client = ingest_client(monkeypatch, tmp_path, database_url, None)
    try:
        assert client.get("/v1/sites", headers={"Authorization": "Bearer anything"}).status_code == 500
    finally:
        gleaner_app.reset_process_deps()
