"""The pure parts of keeping the copy: lifecycle decisions, event identity, signatures, diffs, export paths."""

from __future__ import annotations

import base64
import time

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from gleaner.changes import signing
from gleaner.changes.delivery import AttemptResult, backoff, judge
from gleaner.changes.diff import diff_versions, previous_version
from gleaner.changes.events import Change, ChangeEvent, EventType
from gleaner.changes.lifecycle import (
    DocumentState,
    FetchFacts,
    Move,
    Status,
    Transition,
    changes_for,
    event_for,
    moves_for,
    next_status,
)
from gleaner.changes.outbox import planned_deliveries
from gleaner.changes.subscriptions import Subscription
from gleaner.exporting.export import export_path, export_paths
from gleaner.store.notifications.deliveries import Response

DOC = "8f0c9e1e-0000-4000-8000-000000000001"


def facts(outcome: str, status: int | None = None, **kw: str) -> FetchFacts:
    return FetchFacts(DOC, outcome, status, kw.get("reason", ""), kw.get("superseded_by"))


@pytest.mark.parametrize(("current", "has_snapshot", "fetch", "streak", "expected"), [
    (Status.ACTIVE, True, facts("unavailable", 404), 1, Transition(Status.FAILED, "HTTP 404")),
    (Status.ACTIVE, True, facts("unavailable", 410), 1, Transition(Status.FAILED, "HTTP 410")),
    (Status.ACTIVE, True, facts("unavailable", 500, reason="HTTP 500"), 2, None),
    (Status.ACTIVE, True, facts("unavailable", 500, reason="HTTP 500"), 3,
     Transition(Status.FAILED, "unavailable in 3 consecutive runs: HTTP 500")),
    (Status.ACTIVE, True, facts("denied", 403), 3, None),
    (Status.ACTIVE, True, facts("robots-denied"), 0, None),
    (Status.FAILED, True, facts("fetched", 200), 0, Transition(Status.ACTIVE, None)),
    (Status.FAILED, True, facts("not-modified", 304), 0, Transition(Status.ACTIVE, None)),
    (Status.STALE, True, facts("not-modified", 304), 0, Transition(Status.ACTIVE, None)),
    (Status.ACTIVE, True, facts("fetched", 200, superseded_by="http://x.test/b"),
     0, Transition(Status.SUPERSEDED, "moved permanently to http://x.test/b")),
    (Status.SUPERSEDED, True, facts("fetched", 200, superseded_by="http://x.test/b"), 0, None),
    (Status.DISCOVERED, False, facts("unavailable", 404, reason="HTTP 404"),
     0, Transition(Status.FAILED, "first fetch: unavailable HTTP 404")),
    (Status.DISCOVERED, False, facts("exhausted"), 0, None),
    (Status.DISCOVERED, False, facts("fetched", 200), 0, None),  # active comes with the first version
    (Status.BLOCKED, True, facts("unavailable", 404), 3, None),  # the operator's gate, not the lifecycle's
])
def test_next_status_follows_the_lifecycle(current, has_snapshot, fetch, streak, expected):
    assert next_status(current, has_snapshot, fetch, streak) == expected


@pytest.mark.parametrize(("previous", "to", "has_snapshot", "event"), [
    (Status.ACTIVE, Status.FAILED, True, EventType.REMOVED),
    (Status.ACTIVE, Status.SUPERSEDED, True, EventType.REMOVED),
    (Status.STALE, Status.FAILED, True, EventType.REMOVED),
    (Status.ACTIVE, Status.STALE, True, EventType.STALE),
    (Status.FAILED, Status.ACTIVE, True, EventType.RESTORED),
    (Status.STALE, Status.ACTIVE, True, EventType.RESTORED),
    (Status.DISCOVERED, Status.FAILED, False, None),  # downstream never heard of it
    (Status.FAILED, Status.SUPERSEDED, True, None),  # already removed for downstream
])
def test_each_transition_emits_at_most_one_event(previous, to, has_snapshot, event):
    assert event_for(previous, to, has_snapshot) == event


def test_a_batch_moves_only_the_documents_whose_status_changes_and_announces_what_downstream_held():
    gone, flaky, back, new = (f"8f0c9e1e-0000-4000-8000-00000000000{i}" for i in range(2, 6))
    states = [DocumentState(gone, Status.ACTIVE, True, 1), DocumentState(flaky, Status.ACTIVE, True, 1),
              DocumentState(back, Status.FAILED, True, 0), DocumentState(new, Status.DISCOVERED, False, 1)]
    facts = [FetchFacts(gone, "unavailable", 404), FetchFacts(flaky, "unavailable", 503),
             FetchFacts(back, "not-modified", 304), FetchFacts(new, "unavailable", 404, "HTTP 404")]
    moves = moves_for(states, facts)
    assert moves == [Move(gone, Status.ACTIVE, Status.FAILED, "HTTP 404", True),
                     Move(back, Status.FAILED, Status.ACTIVE, None, True),
                     Move(new, Status.DISCOVERED, Status.FAILED, "first fetch: unavailable HTTP 404", False)]
    # The never-versioned page fails silently: downstream never heard of it.
    assert [(c.document_id, c.type) for c in changes_for(moves, "r1")] == [(gone, EventType.REMOVED),
                                                                          (back, EventType.RESTORED)]


def _event(site: str, type: EventType, at: str) -> ChangeEvent:
    return ChangeEvent(event_id="e-" + site + at, type=str(type), site_domain=site, document_id=DOC, url=None,
                       run_id=None, version=1, snapshot_id=None, content_hash=None, previous_version=None,
                       occurred_at=at)


def test_a_subscription_receives_its_sites_and_types_from_its_creation_on():
    everything = Subscription("s1", "https://hook.example/", None, (), "whsec_x", "2026-11-30T12:00:00+00:00")
    removals = Subscription("s2", "https://hook.example/", "a.test", (str(EventType.REMOVED),), "whsec_y",
                            "2026-11-30T12:00:00+00:00")
    before = _event("a.test", EventType.REMOVED, "2026-11-30T11:59:59+00:00")
    removed = _event("a.test", EventType.REMOVED, "2026-11-30T12:00:01+00:00")
    changed = _event("a.test", EventType.CHANGED, "2026-11-30T12:00:01+00:00")
    elsewhere = _event("b.test", EventType.REMOVED, "2026-11-30T12:00:01+00:00")
    plan = planned_deliveries([before, removed, changed, elsewhere], [everything, removals])
    assert [(d.subscription_id, d.event_id) for d in plan] == [
        ("s1", removed.event_id), ("s2", removed.event_id), ("s1", changed.event_id), ("s1", elsewhere.event_id)]
    assert plan == planned_deliveries([before, removed, changed, elsewhere], [everything, removals])


def test_an_attempt_delivers_on_2xx_and_fails_for_good_only_on_its_last_try():
    assert judge(Response(204, None, 5), 1, last=False, max_attempts=3) is AttemptResult.DELIVERED
    assert judge(Response(302, None, 5), 1, last=False, max_attempts=3) is AttemptResult.RETRY
    assert judge(Response(None, "ConnectError", 5), 3, last=False, max_attempts=3) is AttemptResult.FAILED
    assert judge(Response(500, None, 5), 1, last=True, max_attempts=3) is AttemptResult.FAILED


def test_an_events_id_is_its_changes_identity():
    change = Change(DOC, EventType.CHANGED, run_id="r1", snapshot_id="s2", previous_snapshot_id="s1")
    assert change.event_id == Change(DOC, EventType.CHANGED, run_id="r1", snapshot_id="s2",
                                     previous_snapshot_id="s1").event_id
    # v1 -> v2, back to v1, then v2 again in later runs: four distinct changes.
    keys = {Change(DOC, EventType.CHANGED, run_id=r, snapshot_id=to, previous_snapshot_id=fr).dedupe_key
            for r, fr, to in (("r1", None, "s1"), ("r2", "s1", "s2"), ("r3", "s2", "s1"), ("r4", "s1", "s2"))}
    assert len(keys) == 4
    blocked = [Change(DOC, EventType.BLOCKED, cause=c).event_id for c in ("rule:1:t1", "rule:1:t2")]
    assert blocked[0] != blocked[1]


def test_signatures_verify_with_the_standard_webhooks_reference_implementation():
    secret = signing.new_secret()
    assert secret.startswith("whsec_") and len(base64.b64decode(secret[6:])) >= 24
    body = '{"type":"document.changed","timestamp":"2026-11-30T12:00:00+00:00","data":{}}'
    now = int(time.time())
    headers = signing.headers(secret, "msg_1", now, body)
    assert headers["webhook-signature"].startswith("v1,")
    assert Webhook(secret).verify(body, headers) == {"type": "document.changed",
                                                     "timestamp": "2026-11-30T12:00:00+00:00", "data": {}}
    with pytest.raises(WebhookVerificationError):
        Webhook(signing.new_secret()).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body.replace("changed", "removed"), headers)


def test_retries_back_off_exponentially_from_a_few_seconds():
    assert [backoff(n, 5.0) for n in (1, 2, 3, 4)] == [5.0, 10.0, 20.0, 40.0]
    assert backoff(40, 5.0) == 3600.0


def test_a_diff_counts_added_and_removed_lines():
    d = diff_versions("http://x.test/a", "one\ntwo\nthree\n", "one\n2\nthree\nfour\n", 1, 2)
    assert (d.added, d.removed) == (2, 1)
    assert d.diff.splitlines()[:2] == ["--- http://x.test/a v1", "+++ http://x.test/a v2"]
    assert diff_versions("u", "same\n", "same\n", 1, 2).diff == ""
    first = diff_versions("u", "", "new page\n", None, 1)
    assert first.diff.startswith("--- /dev/null") and first.added == 1
    assert diff_versions("u", "a", "b", 1, 2).diff.endswith("\\ No newline at end of file\n")


def test_the_previous_version_is_the_one_the_current_replaced_not_the_next_lower_number():
    versions = [{"id": "s2", "version": 2, "created_at": "2026-11-30T10:00"},
                {"id": "s1", "version": 1, "created_at": "2026-11-30T09:00"}]
    assert previous_version(versions, "s2") == 1
    assert previous_version(versions, "s1") == 2  # reverted to v1's content
    assert previous_version(versions[1:], "s1") is None


@pytest.mark.parametrize(("url", "path"), [
    ("http://x.test/", "index.md"),
    ("http://x.test/docs/install", "docs/install.md"),
    ("http://x.test/a/../../etc/passwd", "a/___/___/etc/passwd.md"),
    ("http://x.test/%2e%2e/%2E%2E/secret", "___/___/secret.md"),
    ("http://x.test/caf%C3%A9 menu", "caf_menu.md"),
    ("http://x.test/search?q=1", "search_q7de36096.md"),  # sha1("q=1")[:8]
])
def test_export_paths_never_leave_the_directory(url, path):
    assert export_path(url) == path


def test_export_paths_resolve_collisions_the_same_way_every_time():
    urls = ["http://x.test/About", "http://x.test/about", "http://x.test/a b", "http://x.test/a_b"]
    paths = export_paths(urls)
    assert len({p.lower() for p in paths.values()}) == 4
    assert paths == export_paths(reversed(urls))
    assert paths["http://x.test/About"] == "About.md"  # sorted first keeps the plain name
    assert all(".." not in p and not p.startswith("/") for p in paths.values())
