"""The operator's pure parts: durations, site keys, the skip gate, rule transitions and plans, the adaptive
interval, sitemap lastmod."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gleaner.errors import InvalidInput
from gleaner.operator.hooks import GateEvent
from gleaner.operator.lastmod import parse_lastmod
from gleaner.operator.rules import Gate, Rule, RuleAction, RuleTarget, Transition, first_match, plan_rules, transition
from gleaner.operator.schedule import DueSite, Observed, adapt_interval, next_interval
from gleaner.operator.sites import format_duration, parse_duration, site_key


def rule(glob: str, action: RuleAction = RuleAction.SKIP, rid: str = "r1") -> Rule:
    return Rule(rid, "example.com", glob, action, None, "2026-11-30T00:00:00+00:00")


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("30m", 1800), ("6h", 21600),
                                               ("1d", 86400), ("2w", 1209600), ("1h30m", 5400)])
def test_durations_read_as_people_write_them(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "0", "0s", "1x", "h1", "1h 30m", "-5m", "90"])
def test_a_duration_that_is_not_one_is_refused(text):
    with pytest.raises(InvalidInput):
        parse_duration(text)


def test_a_duration_prints_back_compactly():
    assert (format_duration(5400), format_duration(86400), format_duration(None)) == ("1h30m", "1d", "manual")


@pytest.mark.parametrize("key", ["", "Example..com", "_internal", "a b", "x" * 254, "-bad.com", "bad-.com"])
def test_a_site_key_that_is_not_hostname_like_is_refused(key):
    with pytest.raises(InvalidInput):
        site_key(key)


def test_a_site_key_is_lowercased():
    assert site_key(" Docs.Example.COM ") == "docs.example.com"


def test_the_gate_skips_rule_matches_and_review_exclusions_but_a_review_include_wins():
    gate = Gate((rule("/blog/*"),), excluded=frozenset({"https://e.com/old"}),
                included=frozenset({"https://e.com/blog/keep"}))
    assert gate.skipped("https://e.com/blog", "/blog")
    assert gate.skipped("https://e.com/blog/2026/x", "/blog/2026/x")
    assert gate.skipped("https://e.com/old", "/old")
    assert not gate.skipped("https://e.com/blog/keep", "/blog/keep")
    assert not gate.skipped("https://e.com/docs", "/docs")


def test_the_oldest_matching_rule_of_the_asked_kind_is_the_one_that_applies():
    rules = [rule("/docs/*", RuleAction.BLOCK, "b"), rule("/docs/*", RuleAction.SKIP, "s1"),
             rule("/docs/api", RuleAction.SKIP, "s2")]
    assert first_match("/docs/api", rules, RuleAction.SKIP).id == "s1"
    assert first_match("/docs/api", rules, RuleAction.BLOCK).id == "b"
    assert first_match("/about", rules, RuleAction.SKIP) is None


def test_a_gate_is_set_kept_or_lifted_by_comparing_the_recorded_rule_with_the_matching_one():
    assert transition(None, rule("/x")) is Transition.SET
    assert transition("r1", rule("/x", rid="r1")) is Transition.KEEP
    assert transition("r0", rule("/x", rid="r1")) is Transition.SET
    assert transition("r1", None) is Transition.LIFT
    assert transition(None, None) is Transition.KEEP


def test_auto_shortens_on_change_lengthens_without_and_stays_within_its_bounds():
    assert adapt_interval(86400, Observed(changed=2, unchanged=11), 3600, 604800) == 43200
    assert adapt_interval(86400, Observed(changed=0, unchanged=13), 3600, 604800) == 129600
    assert adapt_interval(4000, Observed(changed=3, unchanged=0), 3600, 86400) == 3600
    assert adapt_interval(80000, Observed(changed=0, unchanged=9), 3600, 86400) == 86400
    assert adapt_interval(7200, None, 3600, 86400) == 7200
    assert adapt_interval(7200, Observed(changed=0, unchanged=0), 3600, 86400) == 7200


def test_sitemap_lastmod_takes_a_date_as_the_end_of_that_day_and_ignores_what_it_cannot_read():
    assert parse_lastmod("2026-11-30") == datetime(2026, 12, 1, tzinfo=UTC)
    assert parse_lastmod("2026-11-30T10:00:00Z") == datetime(2026, 11, 30, 10, tzinfo=UTC)
    assert parse_lastmod("2026-11-30T10:00:00+01:00") == datetime(2026, 11, 30, 9, tzinfo=UTC)
    assert parse_lastmod("yesterday") is None and parse_lastmod(None) is None and parse_lastmod("2026-11") is None


def test_a_sitemap_gives_each_loc_its_lastmod_in_order():
    from gleaner.discover.sitemaps import parse_sitemap

    xml = (b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
           b"<url><lastmod>2026-11-01</lastmod><loc>https://e.com/a</loc></url>"
           b"<url><loc>https://e.com/b</loc></url><url><lastmod>2026-11-02</lastmod></url></urlset>")
    sitemap = parse_sitemap(xml)
    assert sitemap.locs == ("https://e.com/a", "https://e.com/b")
    assert sitemap.lastmods == ("2026-11-01", None)


def page(doc: str, path: str, skip: str | None = None, block: str | None = None, decision: str | None = None,
         current: str | None = "snap") -> RuleTarget:
    return RuleTarget(doc, path, skip, block, decision, current)


def test_a_rule_plan_gates_matching_pages_lifts_unmatched_ones_and_leaves_settled_ones_alone():
    skip_blog = rule("/blog/*", RuleAction.SKIP, "skip-blog")
    block_pricing = rule("/pricing", RuleAction.BLOCK, "block-pricing")
    plan = plan_rules("example.com", [skip_blog, block_pricing], [
        page("new-post", "/blog/new"),  # newly skipped
        page("old-post", "/blog/old", skip="skip-blog"),  # already skipped by that rule: nothing to write
        page("pricing", "/pricing", current="snap-p"),  # newly blocked
        page("about", "/about", skip="gone-rule", block="gone-block", current="snap-a"),  # both lifted
        page("reviewed", "/blog/kept", decision="include"),  # the operator's word outranks a skip rule
    ], at="2026-11-30T00:00:00+00:00")
    assert {u.document_id for u in plan.updates} == {"new-post", "pricing", "about"}
    assert plan.applied.skipped == ("new-post",) and plan.applied.unskipped == ("about",)
    assert plan.applied.blocked == ("pricing",) and plan.applied.unblocked == ("about",)
    assert plan.applied.unblocked_snapshots == ("snap-a",)  # ingested again once unblocked
    assert [(c.document_id, c.event) for c in plan.changes] == [("pricing", GateEvent.BLOCKED),
                                                                 ("about", GateEvent.UNBLOCKED)]
    assert plan.changes[0].cause == "rule:block-pricing:2026-11-30T00:00:00+00:00"


def due(adaptive: bool, status: str | None, changed: int = 0, unchanged: int = 0) -> DueSite:
    return DueSite("id", "example.com", "https://example.com/", (), (), None, None,
                   datetime(2026, 11, 30, tzinfo=UTC), 3600, adaptive, None, None, status, changed, unchanged,
                   None, None, None)


def test_a_fixed_schedule_keeps_its_interval_and_auto_adapts_only_to_a_settled_run():
    assert next_interval(due(False, "finished", changed=5), 60, 86400) == 3600
    assert next_interval(due(True, "finished", changed=5), 60, 86400) == 1800
    assert next_interval(due(True, "partial", unchanged=5), 60, 86400) == 5400
    assert next_interval(due(True, "failed", changed=5), 60, 86400) == 3600  # a failure says nothing
