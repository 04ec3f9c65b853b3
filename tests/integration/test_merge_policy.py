"""When the CLI merges fresh vectors into the HNSW index (gleaner.cli.search, gleaner.retrieval.fresh):
a run never does, ``gleaner watch`` and ``serve`` when no run is active, ``gleaner index``
always (test_fresh_vectors.py). Real embedded PostgreSQL with pgvector, a loopback site.
"""

from __future__ import annotations

import pytest

from gleaner.cli.many import watch_many
from gleaner.demosite.testsite import TestSite
from gleaner.operator.sites import add_site
from gleaner.retrieval import search
from tests.integration.paraphrase_site import TOPICS, topic_pages
from tests.integration.test_fresh_vectors import MOON, _where

CHUNKS = len(TOPICS) + 1


@pytest.fixture
def vectors(deps):
    if not deps.search_index.has_vectors():
        pytest.skip("this PostgreSQL has no pgvector: there are no vectors to merge")
    return deps


def _crawl_cli(site, database_url, tmp_path):
    from click.testing import CliRunner

    from gleaner.cli import main

    env = {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "cli-home"),
           "GLEANER_ALLOW_NETWORKS": "127.0.0.0/8", "GLEANER_HOST_DELAY": "0", "GLEANER_EXTRACT_WORKERS": "1"}
    result = CliRunner().invoke(main, ["crawl", site.url + "/", "--site-domain", "topics.test", "--json"], env=env)
    assert result.exit_code == 0, result.output
    return result


def test_a_small_crawl_leaves_its_vectors_fresh_and_searchable_by_meaning(vectors, database_url, tmp_path):
    with TestSite(topic_pages(), max_seconds=300) as site:
        result = _crawl_cli(site, database_url, tmp_path)
    assert "fresh vectors into the vector index" not in result.output  # no rebuild at the crawl's end
    assert _where(vectors) == (CHUNKS, 0, 0)
    hits = search(vectors, MOON, site_domain="topics.test", limit=3)["results"]
    assert hits[0]["url"] == site.url + "/tides" and hits[0]["embedding_score"] is not None


def test_gleaner_crawl_returns_with_its_vectors_unmerged_and_gleaner_index_merges_them(vectors, database_url,
                                                                                    tmp_path, monkeypatch):
    from click.testing import CliRunner

    from gleaner.cli import main
    from gleaner.retrieval import fresh

    monkeypatch.setattr(fresh, "MERGE_BATCH", 1)  # were a merge on the crawl's path, it would be many
    with TestSite(topic_pages(), max_seconds=300) as site:
        result = _crawl_cli(site, database_url, tmp_path)
    assert "fresh vectors into the vector index" not in result.output
    assert _where(vectors) == (CHUNKS, 0, 0)  # the process ended with every vector fresh, none merged
    hits = search(vectors, MOON, site_domain="topics.test", limit=3)["results"]
    assert hits[0]["url"] == site.url + "/tides" and hits[0]["embedding_score"] > 0.3
    env = {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "cli-home")}
    index = CliRunner().invoke(main, ["index"], env=env)
    assert index.exit_code == 0, index.output
    assert f"moved {CHUNKS} fresh vectors into the vector index (rebuild)" in index.output
    assert _where(vectors) == (0, CHUNKS, 0)
    # Every moved row left a dead version: the merge vacuumed the table (the embedded server stops with
    # each command, so autovacuum may never get to them). n_dead_tup is no witness: the merge's own
    # counts may reach the statistics after the VACUUM has reset them.
    import sqlalchemy as sa

    from gleaner.store.backends import db

    with vectors.engine.connect().execution_options(**{db.ADMIN_OPTION: True}) as conn:
        assert conn.execute(sa.text("SELECT last_vacuum IS NOT NULL FROM pg_stat_user_tables"
                                    " WHERE relid = CAST('knowledge.text_chunks' AS regclass)")).scalar()
        conn.rollback()
    assert search(vectors, MOON, site_domain="topics.test", limit=3)["results"] == hits


def test_watch_merges_in_an_idle_moment_not_while_a_run_is_active(vectors, monkeypatch):
    from gleaner.cli import search as cli_search

    seen: list[tuple[tuple[int, int, int], list[str]]] = []
    real = cli_search.merge_when_idle

    def watched(deps, say):  # what was fresh and how the runs stood when the watch was idle; the real merge
        seen.append((_where(deps), [r["status"] for r in deps.metadata.recent_runs(limit=5)]))
        real(deps, say)

    monkeypatch.setattr("gleaner.cli.many.merge_when_idle", watched)
    # A nap lasts until the run's end wakes it; once the watch has been idle, the next tick comes at once.
    monkeypatch.setattr("gleaner.operator.schedule.seconds_to_next_tick",
                        lambda deps, now, every: 0.0 if seen else every)
    with TestSite(topic_pages(), max_seconds=300) as site:
        add_site(vectors, site.url + "/", site_domain="topics.test", every="1h")
        assert watch_many(vectors, every=120, rounds=3) == 1
    assert seen[0] == ((CHUNKS, 0, 0), ["finished"])  # idle only once the run had ended; its vectors fresh
    assert _where(vectors) == (0, CHUNKS, 0)  # and merged then


def _set_run_status(deps, status):
    import sqlalchemy as sa

    from gleaner import tenancy

    with tenancy.all_tenants(), deps.engine.begin() as conn:
        conn.execute(sa.text("UPDATE knowledge.crawl_runs SET status = CAST(:s AS knowledge.crawl_status),"
                             " heartbeat_at = now()"), {"s": status})


def test_the_idle_merger_and_the_cloud_job_merge_only_when_no_run_is_active(vectors):
    import json
    import time

    from gleaner.cloud.entry import run_index_upkeep
    from gleaner.retrieval.upkeep import IdleMerger

    with TestSite(topic_pages(), max_seconds=300) as site:
        add_site(vectors, site.url + "/", site_domain="topics.test", every="1h")
        from gleaner.runtime.runner import crawl, new_request

        crawl(vectors, new_request(site.url + "/", site_domain="topics.test"))
    _set_run_status(vectors, "scraping")  # as if the run were still under way
    body, status, _headers = run_index_upkeep(vectors)
    assert (status, json.loads(body)["merged"]) == (200, 0)
    merger = IdleMerger(vectors.engine, every=0.05).start()  # serve's thread, looking often
    try:
        time.sleep(1.0)
        assert _where(vectors) == (CHUNKS, 0, 0)  # a run is active: nothing merged
        _set_run_status(vectors, "finished")
        deadline = time.monotonic() + 120
        while _where(vectors) != (0, CHUNKS, 0) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        merger.stop()
    assert _where(vectors) == (0, CHUNKS, 0) and merger.reports[0].merged == CHUNKS
    assert search(vectors, MOON, site_domain="topics.test", limit=1)["results"][0]["url"] == site.url + "/tides"
