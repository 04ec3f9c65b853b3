"""The lifecycle routes over HTTP: a composite's moves (409 when not legal, recorded as the caller's
credential), a subscription disabled and enabled, a page rescraped (404 for what is not there)."""

from __future__ import annotations

import time
import uuid

from gleaner.backoffice.wsgi import BackofficeApp
from gleaner.changes import subscriptions
from gleaner.cli.operating import drain_local
from gleaner.operator.routing import create_composite
from gleaner.store.access.tokens import TokenStore
from tests.backoffice.conftest import CHANGED, SITE, Kept, call

OPERATOR = "operator-secret"


def test_composite_moves_are_legal_steps_recorded_as_the_credential_that_made_them(kept: Kept):
    app = BackofficeApp(kept.deps, bearer=OPERATOR)
    made = create_composite(kept.deps, SITE, "Install", [kept.site.url + CHANGED])
    drain_local(kept.deps)
    site_token = TokenStore(kept.deps.engine).add_site(SITE)["token"]
    listed = call(app, "GET", f"/v1/sites/{SITE}/composites", token=OPERATOR).json()["composites"]
    assert [(c["id"], c["status"], c["next"]) for c in listed] == [
        (made.id, "generated", [{"status": "in_validation", "verb": "Send for validation"}])]

    illegal = call(app, "POST", f"/v1/composites/{made.id}", token=OPERATOR, json_body={"status": "prod"})
    assert illegal.status == 409 and "may go to in_validation" in illegal.json()["error"]
    assert call(app, "POST", f"/v1/composites/{made.id}", token=OPERATOR,
                json_body={"status": "in_validation"}).status == 200
    validated = call(app, "POST", f"/v1/composites/{made.id}", token=site_token,
                     json_body={"status": "validated", "note": "the client agreed"})
    assert validated.status == 200, validated.body
    body = validated.json()
    assert body["composite"]["validated_by"] == f"site token for {SITE}"
    assert [(h["to_status"], h["actor"], h["note"]) for h in body["history"]] == [
        ("generated", "gleaner", None), ("in_validation", "operator", None),
        ("validated", f"site token for {SITE}", "the client agreed")]
    again = call(app, "POST", f"/v1/composites/{made.id}", token=site_token, json_body={"status": "validated"})
    assert again.status == 409  # a second click changes nothing
    assert call(app, "GET", f"/v1/composites/{uuid.uuid4()}", token=OPERATOR).status == 404
    assert call(app, "GET", "/v1/composites/not-an-id", token=OPERATOR).status == 404


def test_a_subscription_is_disabled_and_enabled_over_http_and_its_pending_deliveries_cancelled(kept: Kept):
    app = BackofficeApp(kept.deps, bearer=OPERATOR)
    sub = subscriptions.add(kept.deps.metadata, "http://127.0.0.1:9/hook", site=SITE, types=(),
                            allow=kept.deps.settings.allow_networks)
    kept.recrawl("/about")  # one change event: a delivery to a dead target (failed, as the run gave up)
    pending = call(app, "GET", "/v1/notify/deliveries", token=OPERATOR,
                   query={"subscription": sub.id}).json()["deliveries"]
    assert pending
    disabled = call(app, "POST", f"/v1/notify/subscriptions/{sub.id}", token=OPERATOR,
                    json_body={"status": "disabled"})
    assert disabled.status == 200 and disabled.json()["subscription"]["status"] == "disabled"
    states = {d["state"] for d in call(app, "GET", "/v1/notify/deliveries", token=OPERATOR,
                                       query={"subscription": sub.id}).json()["deliveries"]}
    assert "pending" not in states
    retry = call(app, "POST", f"/v1/notify/deliveries/{pending[0]['id']}/retry", token=OPERATOR)
    assert retry.status == 409 and "disabled" in retry.json()["error"]
    listed = call(app, "GET", "/v1/notify/subscriptions", token=OPERATOR).json()["subscriptions"]
    assert [(s["id"], s["status"]) for s in listed] == [(sub.id, "disabled")]
    enabled = call(app, "POST", f"/v1/notify/subscriptions/{sub.id}", token=OPERATOR, json_body={"status": "active"})
    assert enabled.json()["subscription"]["status"] == "active"
    assert call(app, "POST", f"/v1/notify/subscriptions/{uuid.uuid4()}", token=OPERATOR,
                json_body={"status": "active"}).status == 404


def test_a_rescrape_or_replay_of_what_is_not_there_is_404_and_a_replay_names_its_source(kept: Kept):
    app = BackofficeApp(kept.deps, bearer=OPERATOR)
    assert call(app, "POST", f"/v1/documents/{uuid.uuid4()}/rescrape", token=OPERATOR, json_body={}).status == 404
    assert call(app, "POST", f"/v1/runs/{uuid.uuid4()}/replay", token=OPERATOR, json_body={}).status == 404
    started = call(app, "POST", f"/v1/runs/{kept.first['run_id']}/replay", token=OPERATOR, json_body={})
    assert started.status == 202 and started.json()["replay_of"] == kept.first["run_id"]
    run_id = started.json()["run_id"]
    deadline = time.monotonic() + 60
    while (run := call(app, "GET", f"/v1/runs/{run_id}", token=OPERATOR).json())["status"] == "scraping":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert run["status"] == "finished" and run["replay"]["replay_of"] == kept.first["run_id"]
    # The second crawl changed one page: the first run's version of it is not current, so it is left out.
    assert [p["url"] for p in run["replay"]["left_out"]] == [kept.site.url + CHANGED]
