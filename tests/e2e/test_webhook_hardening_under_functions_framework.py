"""The ingest function's webhook under functions-framework refuses hostile input as `gleaner serve` does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import functions_framework
import pytest

from gleaner import app as gleaner_app

ROOT = Path(__file__).resolve().parents[2]
SECRET = "ff-secret-0123456789abcdef0123456789abcdef"
AUTH = {"Authorization": f"Bearer {SECRET}"}


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch, database_url: str, tmp_path: Path) -> Iterator[Any]:
    monkeypatch.setenv("GLEANER_DATABASE_URL", database_url)
    monkeypatch.setenv("GLEANER_HOME", str(tmp_path / "gleaner"))
    monkeypatch.setenv("GLEANER_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("GLEANER_WEBHOOK_MAX_BYTES", "4096")
    monkeypatch.delenv("GLEANER_BUS", raising=False)
    gleaner_app.reset_process_deps()
    app = functions_framework.create_app(target="on_http", source=str(ROOT / "functions/ingest/main.py"))
    yield app.test_client()
    gleaner_app.reset_process_deps()


def ledger(client: Any) -> int:
    return int(gleaner_app.process_deps().references.counts()["feed_articles"])


def test_an_unauthenticated_or_oversized_body_is_refused_and_never_read_into_memory(client):
    assert client.post("/", data=b"x" * 100_000, content_type="application/json").status_code == 401
    assert client.post("/", data=b"x" * 100_000, headers=AUTH, content_type="application/json").status_code == 413
    assert client.get("/refs?q=ice", headers=AUTH).status_code == 200  # the app is still answering


def test_a_lone_surrogate_is_a_400_and_the_next_batch_is_accepted(client):
    poison = b'{"articles": [{"url": "https://n.test/a", "title": "\\ud800", "workspace_id": "w"}]}'
    assert client.post("/", data=poison, headers=AUTH, content_type="application/json").status_code == 400
    assert ledger(client) == 0
    fine = client.post("/", json={"articles": [{"url": "https://n.test/a", "title": "t", "workspace_id": "w"}]},
                       headers=AUTH)
    assert fine.status_code == 202 and ledger(client) == 1


@pytest.mark.parametrize("query", ["q=%00", "q=%ED%A0%80"])
def test_a_nul_or_undecodable_query_is_a_400(client, query):
    assert client.get(f"/refs?{query}", headers=AUTH).status_code == 400


def test_a_negative_content_length_is_a_400(client):
    response = client.post("/", data=b"{}", headers=AUTH, environ_overrides={"CONTENT_LENGTH": "-1"})
    assert response.status_code == 400
