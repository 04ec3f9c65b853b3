"""Channels and digests on values: masking, the services whose hosts are checked, digest periods, messages."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from gleaner.bus.gcp import build_delivery_request
from gleaner.changes import channels, digest, notices
from gleaner.errors import PolicyRefused
from gleaner.messages import DeliveryTask
from gleaner.settings.config import Settings


@pytest.mark.parametrize(("url", "shown", "hidden"), [
    ("slack://T0GLEANER/B0GLEANER/s3cretSlackToken42/#docs", "slack://T...R/B...R/s...2/%23docs/",
     "s3cretSlackToken42"),
    ("https://hooks.slack.com/services/T0GLEANER/B0GLEANER/s3cretSlackToken42", "slack://T...R/B...R/s...2//",
     "s3cretSlackToken42"),
    ("mailtos://alerts:app-passw0rd@example.org?to=team@example.org",
     "mailtos://alerts:****@example.org/team%40example.org", "app-passw0rd"),
    ("tgram://123456789:AAbotT0kenSecret/12345", "tgram://1...t/12345/", "AAbotT0kenSecret"),
    ("discord://1234567/webhookT0ken", "discord://1...7/w...n/", "webhookT0ken"),
    ("json://user:pa55word@receiver.example:8080/hook", "json://user:****@receiver.example:8080/hook", "pa55word"),
    ("https://receiver.example/hook?token=abc123&x", "https://receiver.example/hook?token=****&x", "abc123"),
])
def test_listings_show_the_masked_url_and_errors_lose_its_secrets(url, shown, hidden):
    assert channels.masked(url) == shown
    assert hidden not in channels.redact(f"POST failed for {url} ({hidden})", url)


def test_the_hosts_a_service_connects_to_are_named_or_the_service_is_refused():
    assert channels.targets(channels.instantiate("slack://T0A/B0B/C0Ctoken")) == [
        ("hooks.slack.com", 443), ("hooks.slack-gov.com", 443), ("slack.com", 443)]
    assert channels.targets(channels.instantiate("mailtos://me:pw@gmail.com")) == [("smtp.gmail.com", 587)]
    assert channels.targets(channels.instantiate("jsons://receiver.example/hook")) == [("receiver.example", 443)]
    assert channels.targets(channels.instantiate("tgram://123456789:abcdef/42")) == [("api.telegram.org", 443)]
    with pytest.raises(PolicyRefused, match="cannot tell which hosts the pover:// service connects to"):
        channels.targets(channels.instantiate("pover://user@token"))
    assert channels.is_channel("https://discord.com/api/webhooks/1234/abcdef")
    assert not channels.is_channel("https://receiver.example/hook")  # a Standard Webhooks URL


def test_a_digest_period_starts_on_the_utc_hour_or_day_and_its_id_is_stable():
    at = datetime(2026, 12, 1, 18, 42, 7, tzinfo=UTC)
    assert digest.period(at, 3600) == (datetime(2026, 12, 1, 18, tzinfo=UTC), datetime(2026, 12, 1, 19, tzinfo=UTC))
    assert digest.period(at, 86400) == (datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC))
    start = datetime(2026, 12, 1, 18, tzinfo=UTC)
    assert digest.digest_id("s", start) == digest.digest_id("s", start) != digest.digest_id("t", start)


def test_a_digest_task_is_scheduled_for_the_end_of_its_period():
    settings = Settings(notify_task_url="https://scrape.example/notify/deliver")
    until = datetime(2026, 12, 1, 19, tzinfo=UTC)
    request = build_delivery_request(settings, "projects/p/locations/l/queues/gleaner-notify",
                                     DeliveryTask(delivery_id="d1"), until)
    assert request["task"]["schedule_time"] == until
    assert "schedule_time" not in build_delivery_request(settings, "q", DeliveryTask(delivery_id="d2"))["task"]


def _event(kind: str, path: str, **extra: object) -> dict[str, object]:
    return {"event_id": "e", "type": kind, "site_domain": "example.com", "document_id": "d" + path,
            "url": "https://example.com" + path, "run_id": "r1", "version": 2, "previous_version": 1, **extra}


def test_a_digest_message_lists_its_events_per_site():
    run = {"type": "run.finished", "run_id": "r1", "site_domain": "example.com", "status": "finished",
           "summary": {"fetched": 12, "failed": 1, "snapshots": {"new": 0, "changed": 2}}}
    body = digest.sealed_body(datetime(2026, 12, 1, 18, tzinfo=UTC), datetime(2026, 12, 1, 19, tzinfo=UTC),
                              [json.dumps(_event("document.changed", "/a")), json.dumps(run),
                               json.dumps({**_event("document.new", "/b"), "site_domain": "other.org"})])
    notice = notices.render(body, lambda e: notices.Facts(title="Page " + str(e["url"])[-1:]))
    assert notice.title == "Gleaner digest: 3 changes on example.com, other.org"
    assert "**example.com** (2)" in notice.body and "**other.org** (1)" in notice.body
    assert "- Changed: Page a — https://example.com/a (v1 → v2)" in notice.body
    assert "- run r1 of example.com finished: 12 fetched, 0 new, 2 changed, 1 failed" in notice.body


def test_the_excerpt_is_the_changed_lines_bounded():
    old = "\n".join(f"line {i}" for i in range(40))
    new = "\n".join(f"line {i}" + (" changed" if i % 2 else "") for i in range(40))
    lines, more = notices.excerpt("https://example.com/a", old, new)
    assert len(lines) == notices.EXCERPT_LINES and more == 40 - notices.EXCERPT_LINES
    assert lines[0] == "- line 1" and lines[1] == "+ line 1 changed"
