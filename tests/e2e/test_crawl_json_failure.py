"""`gleaner crawl --json` ends with its one JSON object whatever happens, a failure included, and says
what failed in one line on stderr, without a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from gleaner.demosite.testsite import Page, TestSite

from ..generated_site import Gate, site_pages


def test_a_crawl_whose_blob_store_breaks_mid_run_still_prints_its_json_object(tmp_path: Path, database_url: str):
    home = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
    env.update(GLEANER_DATABASE_URL=database_url, GLEANER_HOME=str(home), GLEANER_ALLOW_NETWORKS="127.0.0.0/8",
               GLEANER_HOST_DELAY="0", GLEANER_EXTRACT_WORKERS="1")
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(site_pages(site.url, 12))
        gate = Gate(pages["/p/6"], limit=60)
        pages["/p/6"] = Page("", handler=gate.handler)
        crawl = subprocess.Popen([sys.executable, "-m", "gleaner.cli", "crawl", site.url + "/", "--json"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert gate.reached.wait(90), "the crawl never reached the held page"
            # The blob store goes away under the run: its directory becomes a file nothing can be written in.
            shutil.rmtree(home / "blobs")
            (home / "blobs").write_text("not a directory")
        finally:
            gate.released.set()
        out, err = crawl.communicate(timeout=120)

    assert crawl.returncode != 0, (out, err)
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["status"] in ("failed", "partial") and summary["run_id"], (out, err)
    assert "Traceback" not in err, (out, err)
    assert [line for line in err.splitlines() if line.startswith("gleaner: error:")], err


def test_a_crawl_that_cannot_write_at_all_still_prints_its_json_object(tmp_path: Path, database_url: str):
    home = tmp_path / "data"
    home.mkdir()
    (home / "blobs").write_text("not a directory")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
    env.update(GLEANER_DATABASE_URL=database_url, GLEANER_HOME=str(home), GLEANER_ALLOW_NETWORKS="127.0.0.0/8",
               GLEANER_HOST_DELAY="0", GLEANER_EXTRACT_WORKERS="1")
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(site_pages(site.url, 3))
        result = subprocess.run([sys.executable, "-m", "gleaner.cli", "crawl", site.url + "/", "--json"], env=env,
                                capture_output=True, text=True, timeout=120, check=False)

    assert result.returncode != 0
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["status"] == "failed" and summary["run_id"], (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
