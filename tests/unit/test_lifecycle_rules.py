"""The pure rules behind the back office's lifecycle actions: a composite's legal moves, what a replay
leaves out, who an HTTP caller is in a history."""

from __future__ import annotations

import pytest

from gleaner.backoffice.api import OPERATOR, Access
from gleaner.errors import InvalidInput
from gleaner.operator.composites import MOVES, CompositeStatus, IllegalMove, check_move, parse_status
from gleaner.stages.replay import left_out_reason

PAGE = {"document_id": "d", "url": "https://a.test/x", "current_snapshot_id": "s1", "deleted": False,
        "snapshot_id": "s1", "version": 3, "content_ref": "domains/a.test/document-snapshots/d/h/content.md"}


def test_the_lifecycle_goes_to_production_one_step_at_a_time_and_back_through_validation():
    path = [CompositeStatus.GENERATED]
    while MOVES[path[-1]] and path[-1] is not CompositeStatus.STALE:
        path.append(MOVES[path[-1]][0])
    assert [s.value for s in path] == ["generated", "in_validation", "validated", "staged", "prod", "stale"]
    assert MOVES[CompositeStatus.STALE] == (CompositeStatus.IN_VALIDATION,)
    for status, allowed in MOVES.items():
        for target in CompositeStatus:
            if target in allowed:
                check_move(status.value, target)
            else:
                with pytest.raises(IllegalMove):
                    check_move(status.value, target)


def test_statuses_are_read_leniently_and_unknown_ones_refused():
    assert parse_status(" In-Validation ") is CompositeStatus.IN_VALIDATION
    with pytest.raises(InvalidInput, match="one of generated"):
        parse_status("shipped")


def test_a_replay_leaves_out_what_moved_on_what_is_gone_and_what_was_erased():
    assert left_out_reason(PAGE) is None
    assert "later version than v3" in str(left_out_reason({**PAGE, "current_snapshot_id": "s2"}))
    assert "no longer kept" in str(left_out_reason({**PAGE, "snapshot_id": None, "content_ref": None}))
    assert "erased" in str(left_out_reason({**PAGE, "deleted": True}))


def test_a_history_names_the_credential():
    assert OPERATOR.actor == "operator"
    assert Access("shop.test").actor == "site token for shop.test"
