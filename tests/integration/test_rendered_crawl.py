"""A crawl with render = auto: the SPA section is read by the browser, the static one by plain fetch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gleaner.runtime.runner import crawl, new_request
from tests.render_site import render_site

from .db_helpers import rows

pytestmark = pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium is not installed")

SITE = "spa.test"


def _versions(deps: Any) -> dict[str, tuple[int, str, str]]:
    return {path: (version, mode, ref) for path, version, mode, ref in rows(
        deps, "SELECT d.path, s.version, s.render_mode::text, s.processed_markdown_ref FROM knowledge.documents d"
              " JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id WHERE d.site_domain = :s",
        s=SITE)}


def test_auto_renders_the_spa_section_and_leaves_the_static_one_on_plain_fetch(make_deps: Any,
                                                                                  browser_renderer: Any) -> None:
    deps = make_deps()
    deps.renderer_override = browser_renderer
    with render_site() as site:
        first = crawl(deps, new_request(site.url + "/", site_domain=SITE, render="auto"))
        versions = _versions(deps)
        mark = len(site.paths())
        asked = site.paths()
        second = crawl(deps, new_request(site.url + "/", site_domain=SITE, render="auto"))
        asked = site.paths()
    assert first["status"] == "finished", first
    modes = {path: mode for path, (_v, mode, _r) in versions.items()}
    assert modes == {"/app/one": "browser", "/app/two": "browser",  # "/" says too little: excluded
                     "/app/linked-only-by-script": "browser",  # linked from the rendered sample only
                     "/docs/one": "plain_fetch", "/docs/two": "plain_fetch"}
    # The sample's rendering is the one scrape reads: each page is fetched and rendered once in the run.
    for name in ("one", "two", "linked-only-by-script"):
        assert asked[:mark].count(f"/app/{name}") == 1, name
        assert asked[:mark].count(f"/api/content?page=%2Fapp%2F{name}") == 1, name
    assert "app one part 3." in deps.blobs.get(versions["/app/one"][2]).decode()
    (doc,) = rows(deps, "SELECT id::text FROM knowledge.documents WHERE path = '/app/one'")
    assert [v["render_mode"] for v in deps.metadata.snapshots_of(doc[0])] == ["browser"]  # what show --json lists
    assert "docs two part 3." in deps.blobs.get(versions["/docs/two"][2]).decode()
    # The fetch facts of a rendered page name what it asked for.
    facts = dict(rows(deps, "SELECT d.path, c.decision_metadata -> 'rendering' FROM knowledge.crawl_page_decisions c"
                            " JOIN knowledge.documents d ON d.id = c.document_id"
                            " WHERE c.run_id = :r AND c.decision_metadata ? 'rendering'", r=first["run_id"]))
    assert set(facts) == {"/app/one", "/app/two", "/app/linked-only-by-script"}
    # Links only rendered DOMs hold joined the run: the sample's (/app/one) and a scraped page's (/app/two).
    via = dict(rows(deps, "SELECT d.path, c.discovered_via FROM knowledge.crawl_page_decisions c"
                          " JOIN knowledge.documents d ON d.id = c.document_id WHERE c.run_id = :r",
                    r=first["run_id"]))
    assert via["/app/linked-only-by-script"] == via["/app/one-child"] == via["/app/two-child"] == "rendered"
    assert asked[:mark].count("/app/two-child") == 1  # asked in the same run (the batch's next part)
    assert [s["outcome"] for s in facts["/app/two"]["sub_requests"]] == ["fetched", "fetched"]
    # Unchanged rendered pages write no new version on the recrawl (and the static ones answer 304).
    assert second["status"] == "finished", second
    assert second["snapshots"]["new"] == 0 and second["snapshots"]["changed"] == 0
    assert _versions(deps) == versions
    assert asked[mark:].count("/api/content?page=%2Fapp%2Fone") == 1  # rendered again, compared by its markdown


def test_never_reads_the_spa_shell_as_it_is(make_deps: Any, browser_renderer: Any) -> None:
    deps = make_deps()
    deps.renderer_override = browser_renderer
    with render_site() as site:
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
        asked = site.paths()
    assert not any(path.startswith("/api/") for path in asked)
    assert {mode for _v, mode, _r in _versions(deps).values()} <= {"plain_fetch"}


def test_a_sites_render_mode_is_kept_and_goes_with_its_scheduled_runs(deps: Any) -> None:
    from datetime import UTC, datetime

    from gleaner.errors import InvalidInput
    from gleaner.operator.schedule import crawl_request
    from gleaner.operator.sites import add_site, find_site

    add_site(deps, "https://spa.example.com/", every="1h", render="auto")
    add_site(deps, "https://plain.example.com/", every="1h")
    with pytest.raises(InvalidInput, match="render must be one of"):
        add_site(deps, "https://spa.example.com/", render="sometimes")
    assert find_site(deps, "spa.example.com").render == "auto"  # type: ignore[union-attr]
    assert find_site(deps, "plain.example.com").render == "never"  # type: ignore[union-attr]
    with deps.metadata.claim_due_sites(datetime.now(UTC)) as due:
        requests = {s.site_domain: crawl_request(s, "r-" + s.site_domain) for s in due.sites}
    assert requests["spa.example.com"].render == "auto" and requests["plain.example.com"].render == "never"


def test_a_render_rule_outranks_the_runs_mode_for_its_paths(make_deps: Any, browser_renderer: Any) -> None:
    from gleaner.operator.rules import add_rule

    deps = make_deps()
    deps.renderer_override = browser_renderer
    add_rule(deps, SITE, "/app/*", "render_always")
    add_rule(deps, SITE, "/docs/*", "render_never")
    with render_site() as site:
        summary = crawl(deps, new_request(site.url + "/", site_domain=SITE))  # the run itself says never
    assert summary["status"] == "finished", summary
    modes = {path: mode for path, (_v, mode, _r) in _versions(deps).items()}
    assert modes == {"/app/one": "browser", "/app/two": "browser", "/app/linked-only-by-script": "browser",
                     "/docs/one": "plain_fetch", "/docs/two": "plain_fetch"}


def test_links_written_by_scripts_feed_discovery_when_pages_are_rendered(make_deps: Any,
                                                                          browser_renderer: Any) -> None:
    deps = make_deps()
    deps.renderer_override = browser_renderer
    with render_site() as site:
        rendered = crawl(deps, new_request(site.url + "/app/three", site_domain=SITE, render="always", max_depth=1))
        plain = crawl(deps, new_request(site.url + "/app/three", site_domain="plain." + SITE, max_depth=1))

    def paths(run_id: str) -> set[str]:
        return {r[0] for r in rows(deps, "SELECT d.path FROM knowledge.crawl_page_decisions c"
                                         " JOIN knowledge.documents d ON d.id = c.document_id WHERE c.run_id = :r",
                                   r=run_id)}

    assert {"/app/linked-only-by-script", "/app/three-child"} <= paths(rendered["run_id"])
    assert "/app/linked-only-by-script" not in paths(plain["run_id"])  # the plain shell links nowhere new


def test_under_auto_the_walk_renders_a_section_known_to_need_the_browser_and_follows_its_script_links(
        make_deps: Any, browser_renderer: Any) -> None:
    deps = make_deps()
    deps.renderer_override = browser_renderer
    with render_site() as site:
        first = crawl(deps, new_request(site.url + "/", site_domain=SITE, render="auto"))  # /app: browser
        mark = len(site.paths())
        second = crawl(deps, new_request(site.url + "/app/three", site_domain=SITE, render="auto", max_depth=1))
        asked = site.paths()[mark:]
    assert first["status"] == "finished" and second["status"] in ("finished", "partial"), second
    via = dict(rows(deps, "SELECT d.path, c.discovered_via FROM knowledge.crawl_page_decisions c"
                          " JOIN knowledge.documents d ON d.id = c.document_id WHERE c.run_id = :r",
                    r=second["run_id"]))
    # The walk read /app/three rendered (its section's verdict is browser) and followed what its script wrote.
    assert via["/app/three-child"] == via["/app/linked-only-by-script"] == "link"
    # Rendered once in the run: the walk's rendering is the one sample and scrape read.
    assert asked.count("/app/three") == 1 and asked.count("/api/content?page=%2Fapp%2Fthree") == 1
    (mode,) = rows(deps, "SELECT s.render_mode::text FROM knowledge.documents d JOIN knowledge.document_snapshots s"
                         " ON s.id = d.current_snapshot_id WHERE d.site_domain = :s AND d.path = '/app/three'", s=SITE)
    assert mode[0] == "browser"
