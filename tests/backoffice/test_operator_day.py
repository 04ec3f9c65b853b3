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


def test_a_resume_right_after_a_cancel_waits_for_the_batch_in_flight_and_finishes(kept: Kept):
    import threading

    from tests.backoffice.conftest import held_page
    from tests.backoffice.test_runcontrol import wait_status

    release = threading.Event()
    kept.site.pages["/about"] = held_page(release, "About us", seconds=20)
    crawler, run_id = kept.crawl_in_background()
    answers: list[httpx.Response] = []
    try:
        assert httpx.post(f"{kept.url}/v1/runs/{run_id[:8]}/cancel", json={}, timeout=30).status_code == 200
        # At once, while the cancelled run's driver still holds its batch in flight (the held page).
        resumer = threading.Thread(target=lambda: answers.append(
            httpx.post(f"{kept.url}/v1/runs/{run_id}/resume", json={}, timeout=60)))
        resumer.start()
        threading.Timer(1.0, release.set).start()
        resumer.join(timeout=60)
    finally:
        release.set()
        crawler.join(timeout=60)
    assert answers and answers[0].status_code == 202, answers[0].text if answers else "no answer"
    run = wait_status(kept, run_id, "finished")
    assert run["error"] is None
