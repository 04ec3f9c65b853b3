"""Politeness precedence (docs/configuration.md): command line > site settings > environment > config file >
default, measured as the spacing of requests in a loopback site's request log, and reported by the summary.
"""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

from gleaner.cli import main
from gleaner.demosite.testsite import Page, TestSite

SITE = "precedence.test"
SLOW = 0.4  # seconds between requests when a slow setting wins; the fast ones are 0


def _pages() -> dict[str, Page]:
    links = "".join(f'<li><a href="/p{i}">page {i}</a></li>' for i in range(5))
    pages = {"/": Page(f"<html><body><h1>Home</h1><ul>{links}</ul></body></html>")}
    for i in range(5):
        pages[f"/p{i}"] = Page(f"<html><body><h1>Page {i}</h1><p>Words on page number {i} for the copy.</p>"
                               "</body></html>")
    return pages


@pytest.fixture
def site() -> TestSite:
    with TestSite(_pages(), max_seconds=120) as served:
        yield served


@pytest.fixture
def env(database_url: str, tmp_path: Path) -> dict[str, str]:
    return {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "home"),
            "GLEANER_ALLOW_NETWORKS": "127.0.0.0/8"}


def gleaner(env: dict[str, str], *args: str) -> str:
    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def crawl(site: TestSite, env: dict[str, str], *options: str) -> tuple[float, dict]:
    """The median spacing of the crawl's requests (robots.txt aside) and its summary's politeness."""
    start = len(site.log)
    summary = json.loads(gleaner(env, "crawl", site.url + "/", "--site-domain", SITE, "--json", *options))
    times = [r.at for r in site.log[start:] if r.path != "/robots.txt"]
    assert len(times) >= 6
    return statistics.median(b - a for a, b in itertools.pairwise(times)), summary["politeness"]


def test_the_command_line_beats_the_site_which_beats_environment_file_and_default(site, env, tmp_path):
    gleaner(env, "sites", "add", site.url + "/", "--site-domain", SITE, "--delay", str(SLOW))
    spacing, used = crawl(site, env, "--delay", "0")
    assert spacing < SLOW / 2 and used["delay"] == 0 and used["delay_source"] == "command line"

    gleaner(env, "sites", "add", site.url + "/", "--site-domain", SITE, "--delay", "0", "--concurrency", "2")
    spacing, used = crawl(site, {**env, "GLEANER_HOST_DELAY": str(SLOW)})
    assert spacing < SLOW / 2
    assert used == {"delay": 0, "delay_source": "site settings", "concurrency": 2,
                    "concurrency_source": "site settings"}
    shown = json.loads(gleaner({**env, "GLEANER_HOST_DELAY": str(SLOW)}, "sites", "show", SITE, "--json"))
    assert shown["politeness"]["delay_source"] == "site settings"

    gleaner(env, "sites", "remove", SITE)  # its politeness goes with it
    spacing, used = crawl(site, {**env, "GLEANER_HOST_DELAY": str(SLOW)})
    assert spacing >= SLOW * 0.9 and (used["delay"], used["delay_source"]) == (SLOW, "environment")
    assert used["concurrency_source"] == "default"

    home_file = Path(env["GLEANER_HOME"]) / "gleaner.toml"
    home_file.parent.mkdir(parents=True, exist_ok=True)
    home_file.write_text(f"host_delay = {SLOW}\n")
    spacing, used = crawl(site, env)
    assert spacing >= SLOW * 0.9 and used["delay_source"] == f"config file {home_file}"
    spacing, used = crawl(site, {**env, "GLEANER_HOST_DELAY": "0"})
    assert spacing < SLOW / 2 and used["delay_source"] == "environment"


def test_sites_show_says_which_politeness_applies_in_words(site, env):
    gleaner(env, "sites", "add", site.url + "/", "--site-domain", SITE, "--every", "1h")
    shown = gleaner(env, "sites", "show", SITE)
    assert "politeness used        delay 1 s (default), concurrency 1 (default)" in shown
    assert "None" not in shown and "False" not in shown and "()" not in shown
