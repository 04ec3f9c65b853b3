"""Run control over the back office: cancel a going run, resume it in the background, refuse what cannot be."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from gleaner.backoffice.pages import TERMINAL_RUN_STATUSES
from gleaner.backoffice.wsgi import BackofficeApp
from tests.backoffice.conftest import Kept, call, held_page


def wait_status(kept: Kept, run_id: str, wanted: str, seconds: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        run = kept.get(f"/v1/runs/{run_id}").json()
        if run["status"] == wanted:
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} is {run['status']}, not {wanted}")


def test_a_cancelled_run_stops_and_a_resumed_one_finishes_on_a_background_thread(kept: Kept):
    release, again = threading.Event(), threading.Event()
    kept.site.pages["/about"] = held_page(release, "About us")
    crawler, run_id = kept.crawl_in_background()
    try:
        cancelled = httpx.post(f"{kept.url}/v1/runs/{run_id}/cancel", json={}, timeout=30)
        assert cancelled.status_code == 200 and cancelled.json() == {"run_id": run_id, "status": "cancelled",
                                                                     "cancelled": True}
    finally:
        release.set()
        crawler.join(timeout=60)
    stopped = kept.get(f"/v1/runs/{run_id}").json()
    assert stopped["status"] == "cancelled" and stopped["error"] == "cancelled by the operator"
    twice = httpx.post(f"{kept.url}/v1/runs/{run_id}/cancel", json={}, timeout=30).json()
    assert twice == {"run_id": run_id, "status": "cancelled", "cancelled": False}
    # Every page now answers only when the test says: the resume's 202 comes while its run is held.
    originals = dict(kept.site.pages)
    for path, page in originals.items():
        if page.content_type.startswith("text/html"):
            kept.site.pages[path] = held_page(again, "Held " + path, seconds=20)
    try:
        resumed = httpx.post(f"{kept.url}/v1/runs/{run_id}/resume", json={}, timeout=30)
        assert resumed.status_code == 202 and resumed.json()["resumed"] is True
        assert kept.get(f"/v1/runs/{run_id}").json()["status"] not in TERMINAL_RUN_STATUSES
    finally:
        kept.site.pages.update(originals)
        again.set()
    run = wait_status(kept, run_id, "finished")
    assert run["fetched"] > 0 and run["error"] is None


def test_what_cannot_be_cancelled_or_resumed_is_a_409_that_says_why(kept: Kept):
    finished = kept.second["run_id"]
    cancel = httpx.post(f"{kept.url}/v1/runs/{finished}/cancel", json={}, timeout=30)
    assert cancel.status_code == 409 and "already ended finished" in cancel.json()["error"]
    resume = httpx.post(f"{kept.url}/v1/runs/{finished}/resume", json={}, timeout=30)
    assert resume.status_code == 409 and "finished" in resume.json()["error"]
    unknown = "00000000-0000-0000-0000-000000000000"
    assert httpx.post(f"{kept.url}/v1/runs/{unknown}/resume", json={}, timeout=30).status_code == 404
    assert httpx.post(f"{kept.url}/v1/runs/nonsense/cancel", json={}, timeout=30).status_code == 404
    assert httpx.get(f"{kept.url}/v1/runs/{finished}/cancel", timeout=30).status_code == 405


class Elsewhere:
    """A bus whose stages run in other processes (as Pub/Sub's do): this process may not drive a run."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"nothing may be sent on this bus ({name})")


def test_on_the_cloud_bus_resume_is_refused_with_the_command_to_use(kept: Kept, make_deps: Any):
    cloud_like = make_deps()
    cloud_like.bus_override = Elsewhere()
    assert cloud_like.local_bus is None
    answer = call(BackofficeApp(cloud_like), "POST", f"/v1/runs/{kept.first['run_id']}/resume", json_body={})
    assert answer.status == 409 and "gleaner runs resume" in answer.json()["error"]
    assert kept.get(f"/v1/runs/{kept.first['run_id']}").json()["status"] == "finished"
