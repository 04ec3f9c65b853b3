"""Volatile text: a "Last updated" line that changes on every crawl raises no false change under an ignore rule.

Real crawls of the loopback demo site (map -> ingest, real PostgreSQL), the rule added through the
real ``gleaner rules add --ignore-text`` command; what a user sees is read back: versions, change
events, the rule recorded on the version that was written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from gleaner.cli import main
from gleaner.demosite.demo import DOCS, article, demo_pages
from gleaner.demosite.testsite import Page, TestSite
from gleaner.runtime.runner import crawl, new_request

SITE = "volatile.test"
PAGE = f"/docs/{DOCS[0]}"
OTHER = "/about"


def stamped(path: str, stamp: str, *, edit: str = "") -> Page:
    return Page(article(path.title(), path + edit, extra=f"<p>Last updated: {stamp}</p>"))


@pytest.fixture
def site() -> Any:
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=240) as running:
        pages.update(demo_pages(running.url))
        yield running, pages


def versions(deps: Any, url: str) -> list[tuple[int, Any]]:
    with deps.engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT s.version, s.extraction_metadata->'ignored' FROM knowledge.document_snapshots s"
            " JOIN knowledge.documents d ON d.id = s.document_id WHERE d.canonical_url = :u ORDER BY s.version"),
            {"u": url}).all()
    return [(r[0], r[1]) for r in rows]


def changed_events(deps: Any, url: str) -> int:
    with deps.engine.connect() as conn:
        return int(conn.execute(sa.text(
            "SELECT count(*) FROM knowledge.document_events WHERE url = :u AND type = 'document.changed'"),
            {"u": url}).scalar())


def test_an_ignored_line_changing_writes_no_version_while_a_real_change_still_does(make_deps, database_url,
                                                                                  tmp_path: Path, site):
    running, pages = site
    deps = make_deps()
    url, other = running.url + PAGE, running.url + OTHER

    def recrawl(stamp: str, *, edit: str = "") -> dict[str, Any]:
        pages[PAGE] = stamped(PAGE, stamp, edit=edit)
        pages[OTHER] = stamped(OTHER, stamp)
        return crawl(deps, new_request(running.url + "/", site_domain=SITE))

    recrawl("2026-12-01 09:00")
    env = {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "gleaner")}
    added = CliRunner().invoke(main, ["rules", "add", SITE, "/docs/*", "--ignore-text", r"^Last updated:",
                                      "--json"], env=env, catch_exceptions=False)
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)["rule"]["pattern"] == r"^Last updated:"

    # Only the timestamp moved: the covered page keeps v1 (compared under the rule though v1 predates it);
    # the page outside the glob is versioned as before.
    summary = recrawl("2026-12-01 10:00")
    assert [v for v, _ in versions(deps, url)] == [1]
    assert [v for v, _ in versions(deps, other)] == [1, 2]
    assert changed_events(deps, url) == 0 and changed_events(deps, other) == 1
    assert summary["snapshots"]["unchanged"] >= 1

    # A real edit beside a new timestamp is a change, and the version records the rule it was compared under.
    recrawl("2026-12-01 11:00", edit=":edited")
    history = versions(deps, url)
    assert [v for v, _ in history] == [1, 2]
    assert history[1][1]["rules"][0]["pattern"] == r"^Last updated:"
    assert changed_events(deps, url) == 1

    # The timestamp alone again, now compared with the masked hash the version recorded.
    recrawl("2026-12-01 12:00", edit=":edited")
    assert [v for v, _ in versions(deps, url)] == [1, 2]
    assert changed_events(deps, url) == 1


@pytest.mark.parametrize(("args", "message"), [
    (["--ignore-text", "("], "not a regular expression"),
    (["--ignore-text", ".*"], "matches an empty line"),
    (["--ignore-text", "x", "--skip"], "not both"),
])
def test_a_bad_ignore_rule_is_refused_with_its_reason(database_url, tmp_path, args, message):
    env = {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "gleaner")}
    result = CliRunner().invoke(main, ["rules", "add", SITE, "/docs/*", *args], env=env)
    assert result.exit_code != 0
    assert message in result.output
