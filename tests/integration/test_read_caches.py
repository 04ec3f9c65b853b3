"""Per-process caches of the site rules and the erasure check: another process's rule or erasure applies at once.

Two Deps on one database stand for two processes (or a stage and the back office): each has its own
engine, so its own connections, caches and view of the cache generation (store/backends/generation.py).
"""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from gleaner import tenancy
from gleaner.changes import outbox
from gleaner.changes.events import Change, EventType
from gleaner.operator.rules import RuleAction
from gleaner.provenance.digests import DIGEST_SCHEME, erasure_digest
from gleaner.store.backends import generation
from gleaner.store.notifications.events import record_changes, take_recorded

SITE = "cached.test"
URL = "https://cached.test/secret"


def _erase_url(deps, site: str, url: str) -> None:
    """What an erasure leaves for later fetches (store/documents/erasure.py step 1): the URL's digest blocklisted."""
    digest = erasure_digest(deps.blocklist.key(site), url.encode("utf-8"))
    with deps.engine.begin() as conn:
        erasure = conn.execute(sa.text(
            "INSERT INTO knowledge.erasures (site_domain, url_digest, requested_by, digest_scheme, digests, removed)"
            " VALUES (:s, :u, 'tester', :scheme, '[]'::jsonb, '{}'::jsonb) RETURNING id"),
            {"s": site, "u": digest, "scheme": DIGEST_SCHEME}).scalar_one()
        conn.execute(sa.text("INSERT INTO knowledge.erased_digests (site_domain, digest, kind, erasure_id)"
                             " VALUES (:s, :d, 'url', :e)"), {"s": site, "d": digest, "e": erasure})


def _statements(deps):
    """A counter of the statements deps's engine sends from now on."""
    seen = []
    sa.event.listen(deps.engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    return seen


@pytest.fixture
def two(make_deps):
    return make_deps(), make_deps()


def test_an_erasure_by_another_process_refuses_the_next_fetch_at_once(two, monkeypatch):
    stage, backoffice = two
    monkeypatch.setattr(generation, "FRESH_SECONDS", 3600.0)  # only a transaction's guard may tell it
    page = {"p": (URL.encode("utf-8"),)}
    assert stage.blocklist.refused(SITE, page) == set()
    sent = _statements(stage)
    assert stage.blocklist.refused(SITE, page) == set()
    assert sent == []  # kept: no statement for the second check

    _erase_url(backoffice, SITE, URL)
    stage.metadata.touch_run("00000000-0000-0000-0000-000000000000")  # the stage's next transaction
    assert stage.blocklist.refused(SITE, page) == {"p"}


def test_an_erasure_applies_without_a_transaction_in_between(two):
    stage, backoffice = two
    assert stage.blocklist.erased_urls(SITE)(URL) is None
    _erase_url(backoffice, SITE, URL)
    time.sleep(generation.FRESH_SECONDS * 2)
    assert stage.blocklist.erased_urls(SITE)(URL) is not None


def test_a_rule_added_by_another_process_holds_for_the_next_read(two, monkeypatch):
    stage, backoffice = two
    monkeypatch.setattr(generation, "FRESH_SECONDS", 3600.0)
    assert stage.metadata.gate_for(SITE).skips == () and stage.metadata.ignore_rules(SITE) == []
    sent = _statements(stage)
    stage.metadata.ignore_rules(SITE)
    assert sent == []

    backoffice.metadata.add_rule(SITE, "/private/*", RuleAction.SKIP, "private")
    backoffice.metadata.add_rule(SITE, "/news/*", RuleAction.IGNORE_TEXT, None, pattern="Updated .*")
    stage.metadata.touch_run("00000000-0000-0000-0000-000000000000")
    assert [r.glob for r in stage.metadata.gate_for(SITE).skips] == ["/private/*"]
    assert [r.glob for r in stage.metadata.ignore_rules(SITE)] == ["/news/*"]

    rule = stage.metadata.site_rules(SITE)[0]
    backoffice.metadata.remove_rule(rule.id)
    stage.metadata.touch_run("00000000-0000-0000-0000-000000000000")
    assert [r.glob for r in stage.metadata.site_rules(SITE)] == ["/news/*"]


def test_a_value_read_for_one_tenant_is_never_served_to_another(deps):
    _erase_url(deps, SITE, URL)
    with tenancy.scope("other.test"):  # row-level security hides the site's rows from another tenant
        assert deps.provenance.has_erasures(SITE) is False
    with tenancy.scope(SITE):
        assert deps.provenance.has_erasures(SITE) is True


def _record_event(deps, path: str) -> None:
    with deps.engine.begin() as conn:
        document = conn.execute(sa.text(
            "INSERT INTO knowledge.documents (site_domain, canonical_url, url_hash, path, source_url)"
            " VALUES (:s, :u, md5(:u), :p, :u) RETURNING id"), {"s": SITE, "u": URL + path, "p": path}).scalar_one()
        record_changes(conn, [Change(document_id=str(document), type=EventType.REMOVED, cause="test")])


def _deliveries(deps) -> int:
    with deps.engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM knowledge.notify_deliveries")).scalar_one()


def test_a_stage_flush_reads_the_outbox_only_after_recording_events(deps):
    take_recorded()
    sent = _statements(deps)
    assert outbox.flush_after_commit(deps) == 0
    assert sent == []  # nothing recorded by this thread: not even the emptiness read

    _record_event(deps, "/a")
    assert outbox.flush_after_commit(deps) == 1
    assert [e.type for e in deps.metadata.list_events(site=SITE)] == ["document.removed"]


def test_a_subscription_added_by_another_process_receives_the_next_flush(two, monkeypatch):
    stage, backoffice = two
    monkeypatch.setattr(generation, "FRESH_SECONDS", 3600.0)
    _record_event(stage, "/a")
    assert outbox.flush_after_commit(stage) == 1 and _deliveries(stage) == 0  # no subscription yet: kept

    backoffice.metadata.add_subscription("http://127.0.0.1:9/hook", SITE, ["document.removed"], "s" * 32)
    _record_event(stage, "/b")  # the stage's next transaction
    assert outbox.flush_after_commit(stage) == 1
    assert _deliveries(stage) == 1


def test_this_process_reads_its_own_rule_and_subscription_at_once(deps, monkeypatch):
    monkeypatch.setattr(generation, "FRESH_SECONDS", 3600.0)  # no time passes: only the write may tell
    assert deps.metadata.site_rules(SITE) == [] and deps.metadata.active_subscriptions() == []
    deps.metadata.add_rule(SITE, "/private/*", RuleAction.SKIP, "private")
    assert [r.glob for r in deps.metadata.site_rules(SITE)] == ["/private/*"]
    deps.metadata.add_subscription("http://127.0.0.1:9/hook", SITE, ["document.removed"], "s" * 32)
    assert len(deps.metadata.active_subscriptions()) == 1
