"""A composite's lifecycle on a real PostgreSQL: only legal moves, each recorded with who made it."""

from __future__ import annotations

import pytest

from gleaner.cli.operating import drain_local
from gleaner.operator import composites
from gleaner.operator.routing import create_composite, list_composites
from gleaner.runtime.runner import crawl, new_request

from .sites import demo_site, set_version

SITE = "demo.test"


def test_a_composite_goes_to_production_by_legal_steps_and_its_history_says_who_moved_it(deps):
    with demo_site() as site:
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
        made = create_composite(deps, SITE, "Install", [site.url + "/docs/install"], actor="cli:alice")
        drain_local(deps)
        with pytest.raises(composites.IllegalMove, match="generated composite cannot go to prod"):
            composites.move(deps, made.id, "prod", "operator")
        composites.move(deps, made.id, "in_validation", "operator")
        validated = composites.move(deps, made.id, "validated", "site token for demo.test", "checked the steps")
        assert (validated.status, validated.validated_by) == ("validated", "site token for demo.test")
        assert validated.validated_at is not None
        with pytest.raises(composites.IllegalMove):
            composites.move(deps, made.id, "validated", "operator")  # a second click: already there
        composites.move(deps, made.id, "staged", "operator")
        prod = composites.move(deps, made.id, "prod", "operator")
        assert prod.validated_by == "site token for demo.test"  # promotion keeps who validated

        set_version(site, "/docs/install")
        site.pages["/docs/install"].modified += 60
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
    [stale] = list_composites(deps, SITE)
    assert stale.status == "stale"
    again = composites.move(deps, made.id, "in_validation", "operator")
    assert (again.validated_by, again.validated_at) == (None, None)  # that validation no longer holds
    moves = [(t.from_status, t.to_status, t.actor) for t in composites.history(deps, made.id)]
    assert moves == [(None, "generated", "cli:alice"), ("generated", "in_validation", "operator"),
                     ("in_validation", "validated", "site token for demo.test"), ("validated", "staged", "operator"),
                     ("staged", "prod", "operator"), ("prod", "stale", composites.GLEANER_ACTOR),
                     ("stale", "in_validation", "operator")]
    assert composites.history(deps, made.id)[2].note == "checked the steps"


def test_an_unknown_status_or_composite_is_a_clear_error(deps):
    with pytest.raises(composites.InvalidInput, match="unknown composite status"):
        composites.move(deps, "00000000-0000-0000-0000-000000000000", "shipped", "operator")
    with pytest.raises(composites.InvalidInput, match="no composite"):
        composites.move(deps, "00000000-0000-0000-0000-000000000000", "validated", "operator")
