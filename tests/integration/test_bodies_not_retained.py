"""Fetched bodies are not kept: a run's fetch-once bodies go when the run settles, locally and on GCS.

An interrupted run keeps them (``runs resume`` replays them) until it settles; upkeep (tick, watch,
sweep) finds runs settled some other way (a cancel, a sweep) and deletes theirs then.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gleaner.runtime.runner import crawl, new_request
from gleaner.stages.upkeep import upkeep
from gleaner.store.backends.blobs import run_prefix
from gleaner.store.ledger.runstate import RunStatus

from .sites import demo_site, set_version
from .test_fetch_once import without_sitemaps

SITE = "demo.test"


@pytest.fixture(params=["local", "gcs"])
def blob_settings(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    if request.param == "local":
        return {}
    bucket = request.getfixturevalue("gcs_bucket")
    url = request.getfixturevalue("gcs_url")
    return {"blob_url": f"gs://{bucket}/tenant", "storage_emulator_host": url, "project": "gleaner-test"}


def _bodies(deps: Any, run_id: str, site: str = SITE) -> list[str]:
    return deps.blobs.list(f"{run_prefix(site, run_id)}/bodies/")


def test_a_finished_runs_bodies_are_gone_and_an_interrupted_runs_stay_until_it_settles(make_deps, blob_settings):
    from gleaner.stages import map as map_stage
    from gleaner.stages import wire

    deps = make_deps(**blob_settings)
    with demo_site() as site:
        without_sitemaps(site)  # the walk reads pages (and keeps their bodies) only without a sitemap
        finished = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        assert finished["status"] == "finished" and finished["fetched"] >= 10
        assert _bodies(deps, finished["run_id"]) == []
        assert deps.blobs.list(f"{run_prefix(SITE, finished['run_id'])}/map/")  # other artefacts stay a while

    with demo_site() as site:
        without_sitemaps(site)
        # A run cut short after its walk: its bodies wait for `runs resume`.
        held = new_request(site.url + "/", site_domain="held.test")
        wire(deps.bus, deps)
        map_stage.handle(held, deps)
    kept = _bodies(deps, held.run_id, "held.test")
    assert len(kept) >= 5
    deps.metadata.set_run_status(held.run_id, RunStatus.INTERRUPTED)
    assert upkeep(deps).bodies_deleted == 0 and _bodies(deps, held.run_id, "held.test") == kept
    deps.metadata.set_run_status(held.run_id, RunStatus.CANCELLED)  # settled without a stage: upkeep's turn
    report = upkeep(deps)
    assert report.runs_discarded == 1 and report.bodies_deleted == len(kept)
    assert _bodies(deps, held.run_id, "held.test") == []
    assert upkeep(deps).runs_discarded == 0  # once caught up, nothing to do


def test_upkeep_prunes_versions_and_expires_old_run_artefacts_by_itself(make_deps):
    import sqlalchemy as sa

    deps = make_deps(keep_versions=1, run_artefact_days=1)
    with demo_site() as site:
        first = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        set_version(site, "/about")  # a second version of one page: its first is beyond keep_versions=1
        assert crawl(deps, new_request(site.url + "/", site_domain=SITE))["snapshots"]["changed"] == 1
    with deps.engine.begin() as conn:  # the first run ended two days ago
        conn.execute(sa.text("UPDATE knowledge.crawl_runs SET finished_at = now() - interval '2 days'"
                             " WHERE id = :r"), {"r": first["run_id"]})
    assert deps.blobs.list(run_prefix(SITE, first["run_id"]) + "/")
    report = upkeep(deps)
    assert report.versions_removed == 1 and report.runs_expired == 1
    assert deps.blobs.list(run_prefix(SITE, first["run_id"]) + "/") == []
    assert deps.metadata.run_summary(first["run_id"])["status"] == "finished"  # the ledger stays


def test_pruning_a_pdfs_old_version_deletes_its_original_too(make_deps):
    from gleaner.demosite.testsite import Page, TestSite

    from .test_erasure_surfaces import _pdf

    deps = make_deps(keep_versions=1)
    index = Page("<html><body><main><h1>Reports</h1><p>The harbour reports, one a quarter, as PDF files for "
                 "everyone who asks.</p><a href='/q2.pdf'>q2</a></main></body></html>")
    with TestSite({"/": index, "/q2.pdf": Page(_pdf("First."), content_type="application/pdf")},
                  max_seconds=120) as site:
        crawl(deps, new_request(site.url + "/", site_domain="pdf.test"))
        site.pages["/q2.pdf"] = Page(_pdf("Second, revised."), content_type="application/pdf", modified=1_700_000_600.0)
        assert crawl(deps, new_request(site.url + "/", site_domain="pdf.test"))["snapshots"]["changed"] == 1
    originals = [k for k in deps.blobs.list("domains/pdf.test/document-snapshots/") if "/original." in k]
    assert len(originals) == 2
    assert upkeep(deps).versions_removed == 1
    assert len([k for k in deps.blobs.list("domains/pdf.test/document-snapshots/") if "/original." in k]) == 1
