"""Keeping the copy current: a loopback site whose pages change, disappear and come back.

Real crawls (map -> ingest over the in-process bus, real PostgreSQL) and the real ``gleaner`` commands
(click's runner, same database and blobs) read back what a user sees: statuses, change events, the
current version after a revert, diffs, exports.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from gleaner.cli import main
from gleaner.demosite.demo import POSTS, article, demo_pages
from gleaner.demosite.testsite import Page, TestSite, redirect_page
from gleaner.runtime.runner import crawl, new_request

SITE = "demo.test"


@pytest.fixture
def site() -> Any:
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=240) as running:
        pages.update(demo_pages(running.url))
        yield running


@pytest.fixture
def env(database_url: str, tmp_path: Path) -> dict[str, str]:
    # The same database and blob directory as make_deps (tests/conftest.py: data_dir = tmp_path/gleaner).
    return {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "gleaner"),
            "GLEANER_ALLOW_NETWORKS": "127.0.0.0/8"}


def gleaner(env: dict[str, str], *args: str) -> Any:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def run(deps: Any, site: TestSite, **kw: Any) -> dict[str, Any]:
    return crawl(deps, new_request(site.url + "/", site_domain=kw.pop("site_domain", SITE), **kw))


def events(deps: Any, since_seq: int = 0) -> list[tuple[str, str, int | None, int | None]]:
    with deps.engine.connect() as conn:
        rows = conn.execute(sa.text(
            # The documents' own events (a run's end is a run event: tests/integration/test_run_events.py).
            "SELECT type::text, url, version, previous_version FROM knowledge.document_events WHERE seq > :s"
            " AND document_id IS NOT NULL"
            " ORDER BY seq"), {"s": since_seq}).all()
    return [(r[0], r[1], r[2], r[3]) for r in rows]


def last_seq(deps: Any) -> int:
    with deps.engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT COALESCE(max(seq), 0) FROM knowledge.document_events")).scalar())


def status(deps: Any, url: str) -> tuple[str, str | None]:
    with deps.engine.connect() as conn:
        row = conn.execute(sa.text("SELECT status::text, status_reason FROM knowledge.documents"
                                   " WHERE canonical_url = :u"), {"u": url}).one()
    return row[0], row[1]


def test_a_first_crawl_announces_each_page_once_and_an_unchanged_recrawl_announces_nothing(make_deps, site):
    deps = make_deps()
    first = run(deps, site)
    announced = events(deps)
    assert first["snapshots"]["new"] == len(announced) > 10
    assert {t for t, *_ in announced} == {"document.new"}
    assert len({url for _, url, *_ in announced}) == len(announced)
    mark = last_seq(deps)
    second = run(deps, site)
    assert second["snapshots"]["new"] == second["snapshots"]["changed"] == 0
    assert events(deps, mark) == []


def test_a_page_that_changes_is_one_changed_event_and_diff_shows_what_changed(make_deps, site, env):
    deps = make_deps()
    run(deps, site)
    mark = last_seq(deps)
    site.pages.update(demo_pages(site.url, changed=("/about",)))
    summary = run(deps, site)
    about = site.url + "/about"
    assert summary["snapshots"]["changed"] == 1
    assert events(deps, mark) == [("document.changed", about, 2, 1)]

    listed = gleaner(env, "changes", SITE, "--since", summary["run_id"], "--json")
    assert listed.exit_code == 0, listed.output
    run_end, event = json.loads(listed.stdout)  # newest first: the run's end, then the page's change
    assert list(run_end) == ["event_id", "type", "run_id", "site_domain", "status", "summary", "occurred_at"]
    assert (run_end["type"], run_end["run_id"], run_end["summary"]["snapshots"]["changed"]) == (
        "run.finished", summary["run_id"], 1)
    assert list(event) == ["event_id", "type", "site_domain", "document_id", "url", "run_id", "version",
                           "snapshot_id", "content_hash", "previous_version", "occurred_at"]
    assert (event["type"], event["url"], event["run_id"], event["version"]) == (
        "document.changed", about, summary["run_id"], 2)

    diff = gleaner(env, "diff", about, "--json")
    assert diff.exit_code == 0, diff.output
    answer = json.loads(diff.stdout)
    assert (answer["from"], answer["to"]) == (1, 2)
    assert answer["added"] >= 1 and answer["removed"] >= 1
    assert answer["diff"].startswith(f"--- {about} v1\n+++ {about} v2\n")
    text = gleaner(env, "diff", about)
    assert text.stdout == answer["diff"]
    first = gleaner(env, "diff", site.url + "/docs/install")
    assert first.stdout.startswith(f"--- /dev/null\n+++ {site.url}/docs/install v1\n")
    assert "v1 is the first version" in first.stderr


def test_a_page_that_answers_404_is_removed_keeps_its_versions_and_is_restored_when_it_answers_again(
        make_deps, site, env):
    deps = make_deps()
    run(deps, site)
    install, about = site.url + "/docs/install", site.url + "/about"
    original = {path: site.pages[path] for path in ("/docs/install", "/about")}
    site.pages["/docs/install"] = Page("<h1>Not found</h1>", status=404)
    site.pages["/about"] = Page("<h1>Gone</h1>", status=410)
    mark = last_seq(deps)
    run(deps, site)
    assert status(deps, install) == ("failed", "HTTP 404")
    assert status(deps, about) == ("failed", "HTTP 410")
    assert sorted(events(deps, mark)) == [("document.removed", about, 1, None), ("document.removed", install, 1, None)]
    shown = gleaner(env, "show", install)
    assert shown.exit_code == 0 and shown.stdout.startswith("# Install")  # versions kept
    assert "failed: HTTP 404" in shown.stderr

    mark = last_seq(deps)
    run(deps, site)  # still gone: no second removal
    assert events(deps, mark) == []

    site.pages.update(original)  # back, byte-identical: answers 304 to the conditional request
    mark = last_seq(deps)
    run(deps, site)
    assert status(deps, install) == ("active", None)
    assert sorted(events(deps, mark)) == [("document.restored", about, 1, None),
                                          ("document.restored", install, 1, None)]


def test_a_page_unavailable_in_three_runs_in_a_row_fails_and_not_before(make_deps, site):
    deps = make_deps()
    run(deps, site)
    pricing = site.url + "/pricing"
    site.pages["/pricing"] = Page("<h1>oops</h1>", status=500)
    run(deps, site)
    run(deps, site)
    assert status(deps, pricing)[0] == "active"
    mark = last_seq(deps)
    run(deps, site)
    state, reason = status(deps, pricing)
    assert state == "failed" and reason is not None and reason.startswith("unavailable in 3 consecutive runs")
    assert events(deps, mark) == [("document.removed", pricing, 1, None)]


def _without_post(site: TestSite, gone: str) -> None:
    """The blog no longer links the post and the sitemap no longer lists it (the page still answers)."""
    posts = [f"/blog/{p}" for p in POSTS if f"/blog/{p}" != gone]
    site.pages["/blog"] = Page(article("Blog", "/blog", links=tuple(posts)))
    urls = "".join(f"<url><loc>{site.url}{p}</loc></url>" for p in ["/blog", *posts, "/tag/crawling"])
    sitemap = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'.encode()
    site.pages["/sitemap-blog.xml.gz"] = Page(gzip.compress(sitemap, mtime=0), content_type="application/x-gzip")


def test_a_page_two_complete_mapping_runs_no_longer_find_is_stale_but_a_bounded_run_proves_nothing(
        make_deps, site):
    deps = make_deps()
    run(deps, site)
    post = f"/blog/{POSTS[0]}"
    url = site.url + post
    _without_post(site, post)
    run(deps, site)
    assert status(deps, url)[0] == "active"  # one complete run missing it is not enough
    run(deps, site, limit=5)  # a bounded run does not count either way
    assert status(deps, url)[0] == "active"
    mark = last_seq(deps)
    run(deps, site)
    assert status(deps, url) == ("stale", "not found by 2 complete mapping runs in a row")
    assert events(deps, mark) == [("document.stale", url, 1, None)]

    site.pages.update({k: v for k, v in demo_pages(site.url).items() if k in ("/blog", "/sitemap-blog.xml.gz")})
    mark = last_seq(deps)
    run(deps, site)
    assert status(deps, url)[0] == "active"
    assert events(deps, mark) == [("document.restored", url, 1, None)]


def test_a_page_that_moves_permanently_to_another_known_page_is_superseded_without_a_new_version(make_deps, site):
    deps = make_deps()
    run(deps, site)
    pricing = site.url + "/pricing"
    site.pages["/pricing"] = redirect_page("/about", 301)
    mark = last_seq(deps)
    summary = run(deps, site)
    assert summary["status"] == "finished"
    assert status(deps, pricing) == ("superseded", f"moved permanently to {site.url}/about")
    assert events(deps, mark) == [("document.removed", pricing, 1, None)]
    with deps.engine.connect() as conn:
        versions = conn.execute(sa.text(
            "SELECT count(*) FROM knowledge.document_snapshots s JOIN knowledge.documents d ON d.id = s.document_id"
            " WHERE d.canonical_url = :u"), {"u": pricing}).scalar()
    assert versions == 1


def test_content_that_reverts_is_shown_verified_and_diffed_as_the_current_version(make_deps, site, env):
    deps = make_deps()
    about = site.url + "/about"
    run(deps, site)  # v1
    site.pages.update(demo_pages(site.url, changed=("/about",)))
    run(deps, site)  # v2
    site.pages.update(demo_pages(site.url))
    mark = last_seq(deps)
    run(deps, site)  # back to v1's content: v1 is current again, no v3
    assert events(deps, mark) == [("document.changed", about, 1, 2)]

    shown = gleaner(env, "show", about, "--json")
    body = json.loads(shown.stdout)
    assert body["version"] == 1 and [v["version"] for v in body["versions"]] == [2, 1]
    assert "v1" in gleaner(env, "show", about).stderr.split("<- current")[0].splitlines()[-1]
    v2 = gleaner(env, "show", about, "--version", "2").stdout
    assert v2 != gleaner(env, "show", about).stdout

    # A sentence only v1's text holds (the seed of the generated paragraphs differs in v2).
    v1_only = next(line for line in body["body"].splitlines() if len(line.split()) > 8 and line not in v2)
    quote = " ".join(v1_only.split()[:6])
    verified = gleaner(env, "verify", about, quote, "--json")
    assert verified.exit_code == 0, verified.output
    assert json.loads(verified.stdout)["version"] == 1

    diff = json.loads(gleaner(env, "diff", about, "--json").stdout)
    assert (diff["from"], diff["to"]) == (2, 1)
    assert json.loads(gleaner(env, "diff", about, "--from", "1", "--to", "2", "--json").stdout)["to"] == 2
    missing = gleaner(env, "show", about, "--version", "7")
    assert missing.exit_code == 1 and "has no version 7 (versions: v1, v2)" in missing.stderr


def test_a_url_held_by_two_sites_is_never_guessed(make_deps, site, env):
    deps = make_deps()
    run(deps, site, site_domain="one.test")
    run(deps, site, site_domain="two.test")
    install = site.url + "/docs/install"
    for command in (["show", install], ["diff", install], ["verify", install, "Install"]):
        result = gleaner(env, *command)
        assert result.exit_code == 2, (command, result.output)
        assert "known under 2 sites (one.test, two.test)" in result.stderr
    chosen = gleaner(env, "show", install, "--site-domain", "two.test", "--json")
    assert chosen.exit_code == 0 and json.loads(chosen.stdout)["document"]["site_domain"] == "two.test"


def test_a_missing_body_is_one_line_not_a_traceback(make_deps, site, env, tmp_path):
    deps = make_deps()
    run(deps, site)
    install = site.url + "/docs/install"
    for path in (tmp_path / "gleaner").rglob("content.md"):
        if "document-snapshots" in str(path):
            path.unlink()
    result = gleaner(env, "show", install)
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and "is missing from the blob store" in result.stderr


def test_runs_urls_lists_each_url_with_its_status_and_reason(make_deps, site, env):
    deps = make_deps()
    site.pages["/pricing"] = Page("<h1>oops</h1>", status=503)
    summary = run(deps, site)
    everything = json.loads(gleaner(env, "runs", summary["run_id"], "--urls", "--json").stdout)
    assert len(everything) == summary["discovered"]
    by_url = {r["url"]: r for r in everything}
    assert by_url[site.url + "/pricing"]["status"] == "unavailable"
    assert by_url[site.url + "/pricing"]["http_status"] == 503
    assert by_url[site.url + "/private/roadmap"]["status"] == "robots-denied"
    only = json.loads(gleaner(env, "runs", summary["run_id"], "--urls", "--status", "unavailable", "--json").stdout)
    assert [r["url"] for r in only] == [site.url + "/pricing"]
    text = gleaner(env, "runs", summary["run_id"], "--status", "unavailable").stdout
    assert text.startswith("unavailable") and "/pricing HTTP 503" in text


def test_export_writes_the_current_tree_and_a_manifest(make_deps, site, env, tmp_path):
    deps = make_deps()
    run(deps, site)
    out = tmp_path / "export"
    result = gleaner(env, "export", SITE, str(out))
    assert result.exit_code == 0, result.output
    manifest = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert {m["path"] for m in manifest} >= {"index.md", "docs/install.md", "about.md"}
    assert all(set(m) == {"url", "path", "version", "content_hash", "fetched_at"} for m in manifest)
    install = next(m for m in manifest if m["path"] == "docs/install.md")
    assert (out / "docs/install.md").read_text().startswith("# Install")
    import hashlib

    assert hashlib.sha1((out / "docs/install.md").read_bytes()).hexdigest() == install["content_hash"]
    raw = tmp_path / "raw"
    assert gleaner(env, "export", SITE, str(raw), "--raw").exit_code == 0
    assert (raw / "docs/install.md").read_bytes() != (out / "docs/install.md").read_bytes()
