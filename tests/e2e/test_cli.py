"""The gleaner command as a user runs it: a real process, real PostgreSQL, a loopback site."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
import sqlalchemy as sa

from gleaner.demosite.testsite import Page, TestSite
from gleaner.settings.config import Settings
from gleaner.store.backends import db

from ..integration.sites import demo_site


@pytest.fixture
def cli_env(tmp_path, database_url):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
    env.update(GLEANER_DATABASE_URL=database_url, GLEANER_HOME=str(tmp_path / "data"),
               GLEANER_ALLOW_NETWORKS="127.0.0.0/8", GLEANER_HOST_DELAY="0", GLEANER_EXTRACT_WORKERS="1")
    return env


def gleaner(env, *args, timeout=120):
    return subprocess.run([sys.executable, "-m", "gleaner.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_crawl_json_prints_one_object_that_matches_the_database(cli_env, database_url):
    with demo_site() as site:
        result = gleaner(cli_env, "crawl", site.url + "/", "--site-domain", "demo.test", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert list(summary) == ["run_id", "site_domain", "status", "discovered", "included", "excluded", "fetched",
                             "not_modified", "refused", "failed", "limited", "snapshots", "warnings",
                             "politeness", "notifications_pending"]
    assert summary["warnings"] == []  # the demo keeps most of what it finds
    # The demo's robots-denied page is refused by policy, not failed by the site.
    assert (summary["refused"], summary["failed"], summary["limited"]) == (1, 0, 0)
    engine = db.create_engine(Settings(database_url=database_url))
    with engine.connect() as conn:
        row = conn.execute(sa.text(
            "SELECT status::text, urls_discovered, urls_included, urls_excluded, urls_scraped, urls_failed,"
            " urls_refused, snapshots_new FROM knowledge.crawl_runs WHERE id = :r"), {"r": summary["run_id"]}).one()
        snapshots = conn.execute(sa.text("SELECT count(*) FROM knowledge.document_snapshots")).scalar()
    engine.dispose()
    assert row == (summary["status"], summary["discovered"], summary["included"], summary["excluded"],
                   summary["fetched"], summary["failed"], summary["refused"], summary["snapshots"]["new"])
    assert snapshots == summary["snapshots"]["new"] == 13
    assert "batch 0" in result.stderr  # progress goes to stderr, never stdout


def test_a_crawl_stopped_by_its_limit_ends_partial_and_says_how_many_urls_were_left(cli_env):
    help_text = gleaner(cli_env, "crawl", "--help").stdout
    assert "default: 1000" in " ".join(help_text.split())
    with demo_site() as site:
        result = gleaner(cli_env, "crawl", site.url + "/", "--site-domain", "demo.test", "--limit", "5", "--json")
        text = gleaner(cli_env, "crawl", site.url + "/", "--site-domain", "demo.test", "--limit", "5")
    summary = json.loads(result.stdout)
    assert summary["status"] == "partial" and summary["discovered"] == 5
    assert 0 < summary["limited"] <= 12  # the demo has 17 URLs; discovery stops reading before it counts them all
    assert f"at least {summary['limited']} more discovered URLs were left" in result.stderr
    assert "raise it with --limit" in result.stderr
    assert "partial" in text.stdout and "raise it with --limit" in text.stdout


def test_runs_docs_and_show_read_back_what_a_crawl_stored(cli_env):
    with demo_site() as site:
        crawl = gleaner(cli_env, "crawl", site.url + "/", "--site-domain", "demo.test", "--json")
        run_id = json.loads(crawl.stdout)["run_id"]
        show = gleaner(cli_env, "show", site.url + "/docs/install")
    runs = gleaner(cli_env, "runs")
    detail = gleaner(cli_env, "runs", run_id)
    docs = gleaner(cli_env, "docs", "demo.test")
    header, row = runs.stdout.splitlines()[:2]
    assert header.split()[:10] == ["run", "status", "site", "found", "fetched", "304", "failed", "new", "changed",
                                   "same"]
    summary = json.loads(crawl.stdout)
    assert row.split()[:10] == [run_id, "finished", "demo.test", str(summary["discovered"]), str(summary["fetched"]),
                                "0", "0", str(summary["snapshots"]["new"]), "0", "0"]
    assert "robots-denied" in detail.stdout and "fetched" in detail.stdout
    assert "docs/" in docs.stdout and "install  [active, scrape, v1]" in docs.stdout
    assert "login  [discovered, skip (rule: login page)]" in docs.stdout
    assert show.returncode == 0 and show.stdout.startswith("# Install") and "v1" in show.stderr


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["crawl", "ftp://example.com/"], "only http(s) URLs"),
        (["crawl", "http://127.0.0.1:{port}/", "--exclude", "blog/*"], "must start with '/'"),
        (["crawl", "http://127.0.0.1:{port}/"], "cannot crawl 127.0.0.1"),
        (["runs", "00000000-0000-0000-0000-000000000000"], "no run"),
        (["show", "https://nowhere.test/x"], "no document"),
    ],
)
def test_expected_failures_exit_non_zero_with_one_clear_line_and_no_traceback(cli_env, args, message):
    port = _unused_port()
    result = gleaner(cli_env, *[a.format(port=port) for a in args])
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_loopback_is_refused_unless_allowed(cli_env):
    env = {**cli_env, "GLEANER_ALLOW_NETWORKS": ""}
    with demo_site() as site:
        result = gleaner(env, "crawl", site.url + "/")
        assert site.log == []
    assert result.returncode != 0 and "non-public address" in result.stderr


def test_a_non_html_start_url_without_a_sitemap_is_a_clear_error(cli_env):
    # (A PDF is a document Gleaner crawls; an image is not.)
    pages = {"/robots.txt": Page("", content_type="text/plain"),
             "/photo.png": Page(b"\x89PNG\r\n\x1a\n", content_type="image/png")}
    with TestSite(pages, max_seconds=60) as site:
        result = gleaner(cli_env, "crawl", site.url + "/photo.png")
    assert result.returncode != 0
    assert "start page" in result.stderr and "refused-content" in result.stderr


def test_malformed_and_oversized_sitemaps_are_recorded_and_the_crawl_goes_on(cli_env):
    import gzip

    bomb = gzip.compress(b"<urlset>" + b" " * (60 * 1024 * 1024) + b"</urlset>", mtime=0)
    with demo_site(**{
        "/robots.txt": Page("User-agent: *\nAllow: /\nSitemap: {base}/broken.xml\nSitemap: {base}/bomb.xml.gz\n",
                            content_type="text/plain"),
        "/broken.xml": Page("<urlset><url><loc>http://x", content_type="application/xml"),
        "/bomb.xml.gz": Page(bomb, content_type="application/x-gzip"),
    }) as site:
        site.pages["/robots.txt"].body = str(site.pages["/robots.txt"].body).replace("{base}", site.url)
        result = gleaner(cli_env, "crawl", site.url + "/", "--json")
        assert result.returncode == 0, result.stderr
        summary = json.loads(result.stdout)
    assert summary["status"] == "finished" and summary["fetched"] >= 10


def test_verify_finds_a_quote_and_reports_drift_after_the_page_changes(cli_env):
    from ..integration.sites import set_version

    with demo_site() as site:
        gleaner(cli_env, "crawl", site.url + "/", "--site-domain", "demo.test")
        body = gleaner(cli_env, "show", site.url + "/docs/install").stdout
        paragraph = body.split("\n\n")[1]
        quote = " ".join(paragraph.split()[:12])
        verified = gleaner(cli_env, "verify", site.url + "/docs/install", quote, "--json")
        set_version(site, "/docs/install")
        gleaner(cli_env, "crawl", site.url + "/", "--site-domain", "demo.test")
        drifted = gleaner(cli_env, "verify", site.url + "/docs/install", quote, "--json")
        missing = gleaner(cli_env, "verify", site.url + "/docs/install", "words that were never on the page")
    answer = json.loads(verified.stdout)
    assert verified.returncode == 0 and answer["verified"] and answer["version"] == 1
    assert answer["text"] == quote and answer["span_kind"] == "paragraph"
    later = json.loads(drifted.stdout)
    assert drifted.returncode == 3 and later["drifted"] and later["version"] == 1
    assert missing.returncode == 4


def test_an_unreachable_database_is_one_clear_line_not_a_traceback(cli_env):
    env = {**cli_env, "GLEANER_DATABASE_URL": f"postgresql://nobody@127.0.0.1:{_unused_port()}/gleaner"}
    result = gleaner(env, "runs")
    assert result.returncode != 0
    assert "database error" in result.stderr and "Traceback" not in result.stderr
