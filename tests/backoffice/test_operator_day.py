"""The back office for an operator's day (issue 44), over HTTP: short ids in paths, deliveries named."""

from __future__ import annotations

import httpx

from tests.backoffice.conftest import Kept


def test_a_short_id_in_a_path_opens_the_page_at_its_whole_id(kept: Kept):
    run_id = kept.first["run_id"]
    sent = kept.get(f"/ui/runs/{run_id[:8]}", status="fetched")
    assert sent.status_code == 303 and sent.headers["location"] == f"/ui/runs/{run_id}?status=fetched"
    assert kept.get(f"/ui/runs/{run_id[:8]}").headers["location"] == f"/ui/runs/{run_id}"
    assert kept.get(f"/v1/runs/{run_id[:8]}").json()["run_id"] == run_id
    document = kept.document_id("/about")
    assert kept.get(f"/ui/documents/{document[:8]}").headers["location"] == f"/ui/documents/{document}"
    missing = kept.get("/ui/runs/ffffffff")
    assert missing.status_code == 404 and "no run ffffffff" in missing.text
    assert kept.get("/v1/runs/ffffffff").json()["error"].startswith("no run ffffffff")


def test_a_post_to_a_short_id_acts_on_the_whole_id(kept: Kept):
    run_id = kept.first["run_id"]
    answer = httpx.post(f"{kept.url}/v1/runs/{run_id[:8]}/cancel", json={}, timeout=10)
    assert answer.status_code == 409 and run_id in answer.json()["error"]
