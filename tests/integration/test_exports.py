"""Exports that pipelines load: JSON Lines and Parquet, read back with their own readers.

A real crawl of the loopback demo site (real PostgreSQL, the blob directory), then the real
``gleaner export`` command; every record is compared with what ``gleaner show --json`` prints for
the same URL, and its span ledger with the bytes ``gleaner slice`` returns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gleaner.cli import main
from gleaner.demosite.demo import demo_pages
from gleaner.demosite.testsite import Page, TestSite
from gleaner.runtime.runner import crawl, new_request

SITE = "export.test"
KEYS = {"url", "title", "site_domain", "document_id", "version", "content_hash", "text_hash", "fetched_at",
        "markdown"}


@pytest.fixture
def crawled(make_deps: Any, database_url: str, tmp_path: Path) -> Any:
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(demo_pages(site.url))
        crawl(make_deps(), new_request(site.url + "/", site_domain=SITE))
    return {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "gleaner")}


def gleaner(env: dict[str, str], *args: str) -> Any:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def shown(env: dict[str, str], url: str) -> dict[str, Any]:
    result = gleaner(env, "show", url, "--site-domain", SITE, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_jsonl_export_has_one_record_per_current_document_matching_show(crawled, tmp_path):
    out = tmp_path / "jsonl"
    result = gleaner(crawled, "export", SITE, str(out), "--format", "jsonl")
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "documents.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(records) >= 5
    assert [r["url"] for r in records] == sorted(r["url"] for r in records)
    for record in records:
        assert set(record) == KEYS
        show = shown(crawled, record["url"])
        assert record["markdown"] == show["body"]
        assert record["version"] == show["version"]
        assert record["document_id"] == show["document"]["id"]
        assert record["site_domain"] == SITE and record["text_hash"]
    install = next(r for r in records if r["url"].endswith("/docs/install"))
    assert install["title"] and install["markdown"].startswith("# Install")


def test_jsonl_spans_are_byte_ranges_that_slice_returns(crawled, tmp_path):
    out = tmp_path / "spans"
    assert gleaner(crawled, "export", SITE, str(out), "--format", "jsonl", "--spans").exit_code == 0
    record = json.loads((out / "documents.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert record["spans"], "an ingested page has a span ledger"
    first = record["spans"][0]
    sliced = gleaner(crawled, "slice", record["text_hash"], str(first["start"]), str(first["end"]))
    assert sliced.exit_code == 0, sliced.output
    assert sliced.stdout.strip() and sliced.stdout.strip() in record["markdown"]


def test_parquet_export_reads_back_with_pyarrow_and_equals_the_jsonl(crawled, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")  # the `parquet` extra; the dev extra installs it
    assert gleaner(crawled, "export", SITE, str(tmp_path / "p"), "--format", "parquet", "--spans").exit_code == 0
    assert gleaner(crawled, "export", SITE, str(tmp_path / "j"), "--format", "jsonl", "--spans").exit_code == 0
    table = pq.read_table(tmp_path / "p" / "documents.parquet")
    lines = (tmp_path / "j" / "documents.jsonl").read_text(encoding="utf-8").splitlines()
    assert table.to_pylist() == [json.loads(line) for line in lines]


def test_export_of_an_unknown_site_fails_with_one_line(crawled, tmp_path):
    result = CliRunner().invoke(main, ["export", "nosuch.test", str(tmp_path / "x"), "--format", "jsonl"],
                                env=crawled)
    assert result.exit_code == 1
    assert "no active documents" in result.stderr
    assert not (tmp_path / "x" / "documents.jsonl").exists()
