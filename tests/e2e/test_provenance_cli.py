"""The provenance commands as a user runs them: cite, citation verify/drift, slice, conflicts, erase, prune."""

from __future__ import annotations

import json
import subprocess
import sys

from ..integration.provenance_site import BODY, LEAD, article_html, news_site
from .test_cli import cli_env  # noqa: F401  (the fixture: the environment a user's shell would have)


def gleaner(env, *args):
    """The command's bytes as printed (``slice`` prints stored bytes, not text)."""
    return subprocess.run([sys.executable, "-m", "gleaner.cli", *args], env=env, capture_output=True,
                          timeout=120, check=False)


def test_cite_verify_drift_and_slice_speak_the_documented_json(cli_env):  # noqa: F811
    articles = {"/news/budget": article_html("Budget", [LEAD, *BODY]),
                "/mirror/budget": article_html("Budget", [LEAD, *BODY])}
    with news_site(articles) as site:
        assert gleaner(cli_env, "crawl", site.url + "/", "--site-domain", "news.test").returncode == 0
        url = site.url + "/news/budget"
        cite = gleaner(cli_env, "cite", url, "approved the new harbour budget", "--json")
        refused = gleaner(cli_env, "cite", url, "pprove")
        long = gleaner(cli_env, "cite", url, LEAD)
    assert cite.returncode == 0, cite.stderr
    cited = json.loads(cite.stdout)
    assert list(cited) == ["citation_id", "document_id", "snapshot_id", "version", "text_hash", "start", "end",
                           "quote"]
    assert (refused.returncode, refused.stdout) == (5, b"")
    assert refused.stderr.decode().count("\n") == 1 and "word boundaries" in refused.stderr.decode()
    assert long.returncode == 5 and b"15 words" in long.stderr

    verify = gleaner(cli_env, "citation", "verify", cited["citation_id"], "--json")
    assert verify.returncode == 0 and json.loads(verify.stdout)["state"] == "verified"
    drift = json.loads(gleaner(cli_env, "citation", "drift", cited["citation_id"], "--json").stdout)
    assert drift["state"] == "holds" and drift["current"]["start"] == cited["start"]
    piece = gleaner(cli_env, "slice", cited["text_hash"], str(cited["start"]), str(cited["end"]))
    assert piece.stdout == b"approved the new harbour budget"

    (conflict,) = json.loads(gleaner(cli_env, "conflicts", "list", "news.test", "--json").stdout)
    assert conflict["status"] == "open"
    assert gleaner(cli_env, "conflicts", "set", conflict["id"], "acknowledged").returncode == 0
    assert json.loads(gleaner(cli_env, "conflicts", "list", "news.test", "--status", "open", "--json").stdout) == []

    prune = json.loads(gleaner(cli_env, "prune", "--json").stdout)
    assert prune["versions_removed"] == 0 and prune["keep_versions"] == 10
    erase = gleaner(cli_env, "erase", site.url + "/mirror/budget", "--reason", "takedown", "--yes", "--json")
    assert erase.returncode == 0, erase.stderr
    assert json.loads(erase.stdout)["versions_removed"] == 1
    # The mirror held the same text as the article: the text stays for the article, which still verifies.
    assert json.loads(erase.stdout)["texts_shared"] == [cited["text_hash"]]
    assert gleaner(cli_env, "citation", "verify", cited["citation_id"]).returncode == 0


def test_every_reader_says_erased_for_an_erased_page_and_none_prints_its_url(cli_env, tmp_path):  # noqa: F811
    with news_site({"/news/budget": article_html("Budget", [LEAD, *BODY]),
                    "/news/other": article_html("Other", BODY[:2])}) as site:
        crawled = gleaner(cli_env, "crawl", site.url + "/", "--site-domain", "news.test", "--json")
        assert crawled.returncode == 0, crawled.stderr
        run_id = json.loads(crawled.stdout)["run_id"]
        url = site.url + "/news/budget"
        assert gleaner(cli_env, "erase", url, "--reason", "takedown", "--yes").returncode == 0
        show = gleaner(cli_env, "show", url)
        show_json = gleaner(cli_env, "show", url, "--json")
        docs = gleaner(cli_env, "docs", "news.test", "--json")
        urls = gleaner(cli_env, "runs", run_id, "--urls", "--json")
        export = gleaner(cli_env, "export", "news.test", str(tmp_path / "out"))
        cited = json.loads(gleaner(cli_env, "cite", site.url + "/news/other", "Councillors argued", "--json").stdout)
        span = [cited["text_hash"], str(cited["start"]), str(cited["start"] + 11)]
        own = gleaner(cli_env, "--tenant", "news.test", "slice", *span)
        other = gleaner(cli_env, "--tenant", "elsewhere.test", "slice", *span)
    assert own.returncode == 0 and own.stdout == b"Councillors"
    assert other.returncode != 0 and b"no canonical text" in other.stderr  # another tenant's text: as if absent
    assert show.returncode == 0 and b"erased" in show.stdout and b"/news/budget" not in show.stdout + show.stderr
    assert json.loads(show_json.stdout)["erased"] is True
    listed = [d for d in json.loads(docs.stdout) if d["status"] == "erased"]
    assert len(listed) == 1 and listed[0]["url"].startswith("erased:")
    assert b"erased:" in urls.stdout and b"/news/budget" not in urls.stdout
    assert export.returncode == 0, export.stderr
    manifest = [json.loads(line) for line in (tmp_path / "out" / "manifest.jsonl").read_text().splitlines()]
    assert [m for m in manifest if m.get("erased")] == [{"url": listed[0]["url"], "erased": True}]
    assert not any("/news/budget" in m["url"] for m in manifest)
