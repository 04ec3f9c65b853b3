"""A newcomer's first hour: the commands as a user runs them, in real processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from gleaner.demosite.testsite import Page, TestSite

from ..integration.sites import demo_site


def gleaner(env: dict[str, str], *args: str, cwd: Path | None = None, timeout: float = 180):
    return subprocess.run([sys.executable, "-m", "gleaner.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, check=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_") and k != "XDG_DATA_HOME"}
    env.update(values)
    return env


def test_a_second_demo_from_another_directory_finds_everything_unchanged_and_writes_nothing(tmp_path):
    # No setting at all: the data goes to ~/.local/share/gleaner, whatever the current directory.
    home = tmp_path / "user"
    env = clean_env(HOME=str(home), GLEANER_EXTRACT_WORKERS="1")
    first_dir, second_dir = tmp_path / "a", tmp_path / "b"
    first_dir.mkdir()
    second_dir.mkdir()
    port = str(free_port())
    first = gleaner(env, "demo", "--json", "--port", port, cwd=first_dir)
    assert first.returncode == 0, first.stderr
    data = home / ".local" / "share" / "gleaner"
    snapshots = data / "blobs" / "domains" / "demo.gleaner.local" / "document-snapshots"
    blobs_after_first = sorted(p.relative_to(snapshots) for p in snapshots.rglob("*"))
    tree_after_first = json.loads(gleaner(env, "docs", "demo.gleaner.local", "--json", cwd=second_dir).stdout)

    second = gleaner(env, "demo", "--json", "--port", port, cwd=second_dir)
    assert second.returncode == 0, second.stderr
    one, two = json.loads(first.stdout), json.loads(second.stdout)
    assert one["snapshots"]["new"] == 13
    assert two["snapshots"] == {"new": 0, "changed": 0, "unchanged": 13}
    assert sorted(p.relative_to(snapshots) for p in snapshots.rglob("*")) == blobs_after_first
    assert len(json.loads(gleaner(env, "docs", "demo.gleaner.local", "--json", cwd=tmp_path).stdout)) == len(
        tree_after_first)
    runs = json.loads(gleaner(env, "runs", "--json", cwd=tmp_path).stdout)
    assert [r["run_id"] for r in runs[:2]] == [two["run_id"], one["run_id"]]
    assert [r["snapshots"]["new"] for r in runs[:2]] == [0, 13]  # no snapshot row written by the second

    info = gleaner(env, "info", "--json", cwd=second_dir)
    assert info.returncode == 0, info.stderr
    facts = json.loads(info.stdout)
    assert facts["home"] == str(data) and facts["database_embedded"] is True
    assert facts["blob_url"] == (data / "blobs").as_uri()
    assert facts["schema_revision"] == facts["schema_head"] and facts["version"]


def test_gleaner_home_is_the_one_place_every_command_reads_from_any_directory(tmp_path, database_url):
    env = clean_env(GLEANER_HOME=str(tmp_path / "home"), GLEANER_DATABASE_URL=database_url,
                    GLEANER_ALLOW_NETWORKS="127.0.0.0/8", GLEANER_HOST_DELAY="0", GLEANER_EXTRACT_WORKERS="1")
    (tmp_path / "elsewhere").mkdir()
    with demo_site() as site:
        crawl = gleaner(env, "crawl", site.url + "/", "--site-domain", "demo.test", "--json", cwd=tmp_path)
    assert crawl.returncode == 0, crawl.stderr
    runs = json.loads(gleaner(env, "runs", "--json", cwd=tmp_path / "elsewhere").stdout)
    assert [r["run_id"] for r in runs] == [json.loads(crawl.stdout)["run_id"]]
    assert (tmp_path / "home" / "blobs" / "domains" / "demo.test").is_dir()
    info = json.loads(gleaner(env, "info", "--json", cwd=tmp_path / "elsewhere").stdout)
    assert info["home"] == str(tmp_path / "home") and info["database_embedded"] is False


def test_a_password_in_the_database_url_is_masked_by_info(tmp_path, database_url):
    from urllib.parse import urlsplit

    parts = urlsplit(database_url)  # the test server trusts local users: any password is accepted
    with_password = database_url.replace(f"//{parts.netloc}",
                                         f"//{parts.username or 'postgres'}:hunter2@{parts.netloc.split('@')[-1]}")
    env = clean_env(GLEANER_HOME=str(tmp_path / "home"), GLEANER_DATABASE_URL=with_password)
    result = gleaner(env, "info")
    assert result.returncode == 0, result.stderr
    assert "hunter2" not in result.stdout and ":***@" in result.stdout and str(tmp_path / "home") in result.stdout


def test_crawl_progress_without_a_terminal_counts_pages_and_reports_batches_in_order(tmp_path, database_url):
    paths = [f"/p/{i}" for i in range(230)]
    pages = {"/robots.txt": Page("User-agent: *\nAllow: /\n", content_type="text/plain"),
             "/": Page("<html><body><h1>Index</h1>" + "".join(f'<a href="{p}">{p}</a> ' for p in paths)
                       + "</body></html>")}
    for i, path in enumerate(paths):
        pages[path] = Page(f"<html><head><title>Page {i}</title></head><body><article><h1>Page {i}</h1>"
                           f"<p>{f'Words about the number {i}. ' * 12}</p></article></body></html>")
    env = clean_env(GLEANER_HOME=str(tmp_path / "home"), GLEANER_DATABASE_URL=database_url,
                    GLEANER_ALLOW_NETWORKS="127.0.0.0/8", GLEANER_EXTRACT_WORKERS="1")
    with TestSite(pages, max_seconds=120) as site:
        result = gleaner(env, "crawl", site.url + "/", "--delay", "0", "--concurrency", "8", "--json")
    assert result.returncode == 0, result.stderr
    lines = [line.removeprefix("gleaner: ") for line in result.stderr.splitlines()]
    mapped = lines.index("mapping: 231 URLs found")
    scraping = next(i for i, line in enumerate(lines) if line.startswith("scraping: 231 pages"))
    batches = [line for line in lines if line.startswith("batch ")]
    assert mapped < scraping < lines.index(batches[0])
    assert [b.split(":")[0] for b in batches] == ["batch 0", "batch 1", "batch 2"]
    assert json.loads(result.stdout)["fetched"] == 231


def test_a_port_with_nothing_listening_says_connection_refused(tmp_path):
    env = clean_env(GLEANER_HOME=str(tmp_path / "home"), GLEANER_ALLOW_NETWORKS="127.0.0.0/8")
    result = gleaner(env, "scrape", f"http://127.0.0.1:{free_port()}/")
    assert result.returncode == 1
    assert "connection refused" in result.stderr and result.stderr.startswith("gleaner: error: ")
    for internal in ("aiohttp", "ClientConnectorError", "ssl:default", "Traceback"):
        assert internal not in result.stderr


def test_a_crawl_that_cannot_start_says_why_once(tmp_path):
    env = clean_env(GLEANER_HOME=str(tmp_path / "home"), GLEANER_ALLOW_NETWORKS="127.0.0.0/8")
    result = gleaner(env, "crawl", f"http://127.0.0.1:{free_port()}/", "--delay", "0")
    assert result.returncode == 1
    assert result.stderr.count("connection refused") == 1, result.stderr
    assert result.stderr.splitlines()[-1].startswith("gleaner: error: ")


def test_loopback_without_the_allow_setting_names_the_setting(tmp_path):
    env = clean_env(GLEANER_HOME=str(tmp_path / "home"))
    with demo_site() as site:
        result = gleaner(env, "scrape", site.url + "/docs/install")
        assert site.log == []
    assert result.returncode == 1 and "GLEANER_ALLOW_NETWORKS" in result.stderr


def test_usage_errors_speak_in_the_same_one_line_style(tmp_path):
    env = clean_env(GLEANER_HOME=str(tmp_path / "home"))
    for args in (["runs", "--limit", "-1"], ["crawl", "--no-such-option"], ["no-such-command"]):
        result = gleaner(env, *args)
        assert result.returncode == 2, args
        assert result.stderr.startswith("gleaner: error: ") and "--help" in result.stderr
        assert "Error:" not in result.stderr and "Traceback" not in result.stderr and "{" not in result.stderr


def test_scrape_prints_one_page_as_markdown_and_obeys_robots(tmp_path):
    env = clean_env(GLEANER_HOME=str(tmp_path / "home"), GLEANER_ALLOW_NETWORKS="127.0.0.0/8")
    with demo_site() as site:
        page = gleaner(env, "scrape", site.url + "/docs/install")
        as_json = gleaner(env, "scrape", site.url + "/docs/install", "--json")
        denied = gleaner(env, "scrape", site.url + "/private/secret")
        requested = site.paths()
    assert page.returncode == 0, page.stderr
    assert page.stdout.startswith("# Install")
    answer = json.loads(as_json.stdout)
    assert answer["status"] == 200 and answer["markdown"] == page.stdout and len(answer["content_hash"]) == 40
    assert denied.returncode == 1 and "robots-denied" in denied.stderr
    assert "/private/secret" not in requested
    assert not (tmp_path / "home" / "blobs").exists()  # nothing stored without --store


def test_map_lists_a_sites_urls_without_fetching_the_pages_its_sitemap_names(tmp_path):
    env = clean_env(GLEANER_HOME=str(tmp_path / "home"), GLEANER_ALLOW_NETWORKS="127.0.0.0/8",
                    GLEANER_HOST_DELAY="0")
    with demo_site() as site:
        result = gleaner(env, "map", site.url + "/", "--json")
        requested = set(site.paths())
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    urls = {row["url"] for row in answer["urls"]}
    assert site.url + "/docs/install" in urls and len(urls) == 17
    from_sitemaps = {row["url"].removeprefix(site.url) for row in answer["urls"] if row["via"] == "sitemap"}
    assert from_sitemaps and not from_sitemaps & requested
    assert "mapping: 17 URLs found" in result.stderr


def test_a_config_file_sets_what_the_environment_does_not(tmp_path):
    (tmp_path / "gleaner.toml").write_text('allow_networks = ["127.0.0.0/8"]\nhost_delay = 0\n')
    env = clean_env(GLEANER_HOME=str(tmp_path / "home"))
    with demo_site() as site:
        allowed = gleaner(env, "scrape", site.url + "/docs/install", cwd=tmp_path)
        overridden = gleaner({**env, "GLEANER_ALLOW_NETWORKS": "10.0.0.0/8"}, "scrape", site.url + "/docs/install",
                             cwd=tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert overridden.returncode == 1 and "non-public address" in overridden.stderr  # the environment wins
    (tmp_path / "gleaner.toml").write_text("hots_delay = 0\n")
    typo = gleaner(env, "info", cwd=tmp_path)
    assert typo.returncode == 1 and "unknown setting 'hots_delay'" in typo.stderr


def test_a_failed_runs_error_shows_without_json(tmp_path, database_url):
    env = clean_env(GLEANER_HOME=str(tmp_path / "home"), GLEANER_DATABASE_URL=database_url,
                    GLEANER_ALLOW_NETWORKS="127.0.0.0/8")
    pages = {"/robots.txt": Page("busy", status=503, content_type="text/plain"), "/": Page("<html>hi</html>")}
    with TestSite(pages, max_seconds=60) as site:
        crawl = gleaner(env, "crawl", site.url + "/")
    assert crawl.returncode == 1 and "robots.txt unavailable" in crawl.stderr
    (run,) = json.loads(gleaner(env, "runs", "--json").stdout)
    detail = gleaner(env, "runs", run["run_id"])
    assert run["status"] == "failed"
    assert "error: cannot crawl 127.0.0.1: robots.txt unavailable" in detail.stdout


def test_scrape_store_keeps_the_page_as_a_run_of_one_url(tmp_path, database_url):
    env = clean_env(GLEANER_HOME=str(tmp_path / "home"), GLEANER_DATABASE_URL=database_url,
                    GLEANER_ALLOW_NETWORKS="127.0.0.0/8", GLEANER_EXTRACT_WORKERS="1")
    with demo_site() as site:
        stored = gleaner(env, "scrape", site.url + "/docs/install", "--store", "--site-domain", "demo.test")
        shown = gleaner(env, "show", site.url + "/docs/install")
    assert stored.returncode == 0, stored.stderr
    assert stored.stdout.startswith("# Install") and "Traceback" not in stored.stderr
    (run,) = json.loads(gleaner(env, "runs", "--json").stdout)
    assert run["site_domain"] == "demo.test" and run["snapshots"]["new"] == 1
    assert shown.returncode == 0 and shown.stdout == stored.stdout
