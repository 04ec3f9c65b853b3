"""Figures for issue 10 (runs always settle): requests per page under failing blob stores, and the
counts after three concurrent crawls of one site. Not a timed benchmark: counts, not speeds.

    PYTHONPATH=. .venv/bin/python infra/bench/faults.py [--pages 307]

Needs root (``chattr +i`` makes the read-only directories) and starts its own embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
import warnings
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from tests.conftest import _admin_engine, test_settings
from tests.generated_site import generated_site, page_requests
from tests.integration.test_failures import FailingWrites

from gleaner.app import Deps
from gleaner.bus.local import LocalBus
from gleaner.runtime.runner import crawl, new_request
from gleaner.settings.config import Settings
from gleaner.store.backends import db


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gleaner.cli", *args], env=env, capture_output=True, text=True,
                          check=False)


def _env(url: str, data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
    env.update(GLEANER_DATABASE_URL=url, GLEANER_HOME=str(data), GLEANER_ALLOW_NETWORKS="127.0.0.0/8",
               GLEANER_HOST_DELAY="0", GLEANER_HOST_CONCURRENCY="4")
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=307)
    n = parser.parse_args().pages
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
    tmp = Path(tempfile.mkdtemp(prefix="gleaner-faults-"))
    server = pgserver.get_server(tmp / "pg", cleanup_mode="stop")
    base = server.get_uri()
    admin = _admin_engine(base)

    def fresh_db() -> str:
        name = "f_" + uuid.uuid4().hex[:8]
        with admin.connect() as conn:
            conn.execute(sa.text(f"CREATE DATABASE {name}"))
        return base.replace("/postgres?", f"/{name}?")

    figures: dict[str, Any] = {"pages": n}
    try:
        with generated_site(n) as site:
            url, since = fresh_db(), len(site.log)
            settings = test_settings(tmp / "a", url)
            probe = Deps(settings, bus_override=LocalBus())
            deps = Deps(settings, bus_override=LocalBus(), blobs_override=FailingWrites(probe.blobs))
            summary = crawl(deps, new_request(site.url + "/", site_domain="gen.test"))
            figures["failing_writes"] = {"status": summary["status"], "requests": len(site.log) - since,
                                         "requests_per_page": round((len(site.log) - since) / n, 3),
                                         "most_requests_for_one_page": max(page_requests(site, since).values())}
            deps.close()
            probe.close()

            url, since = fresh_db(), len(site.log)
            readonly = tmp / "readonly"
            readonly.mkdir()
            subprocess.run(["chattr", "+i", str(readonly)], check=True)
            result = _cli({**_env(url, tmp / "b"), "GLEANER_BLOB_URL": f"file://{readonly}"}, "crawl",
                          site.url + "/", "--json")
            subprocess.run(["chattr", "-i", str(readonly)], check=True)
            figures["read_only_blob_root"] = {"exit": result.returncode, "requests": len(site.log) - since,
                                              "requests_per_page": round((len(site.log) - since) / n, 3)}

            url, since = fresh_db(), len(site.log)
            snapshots = tmp / "c" / "blobs" / "domains" / "gen.test" / "document-snapshots"
            snapshots.mkdir(parents=True)
            subprocess.run(["chattr", "+i", str(snapshots)], check=True)
            result = _cli(_env(url, tmp / "c"), "crawl", site.url + "/", "--site-domain", "gen.test", "--json")
            subprocess.run(["chattr", "-i", str(snapshots)], check=True)
            crawled = json.loads(result.stdout)
            before = len(site.log)
            resumed = json.loads(_cli(_env(url, tmp / "c"), "runs", "resume", crawled["run_id"], "--json").stdout)
            figures["read_only_snapshots"] = {
                "exit": result.returncode, "status": crawled["status"], "requests": before - since,
                "requests_per_page": round((before - since) / n, 3), "resumed": resumed["status"],
                "resume_new": resumed["snapshots"]["new"], "resume_requests": len(site.log) - before}

            url = fresh_db()
            env = _env(url, tmp / "d")
            _cli(env, "runs")  # migrate once before the three start
            procs = [subprocess.Popen([sys.executable, "-m", "gleaner.cli", "crawl", site.url + "/", "--site-domain",
                                       "gen.test", "--json"], env=env, stdout=subprocess.PIPE, text=True)
                     for _ in range(3)]
            runs = [json.loads(p.communicate()[0]) for p in procs]
            engine = db.create_engine(Settings(database_url=url))
            with engine.connect() as conn:
                versions = conn.execute(sa.text("SELECT count(*) FROM knowledge.document_snapshots")).scalar()
                false_changes = conn.execute(sa.text(
                    "SELECT count(*) FROM knowledge.crawl_page_decisions c JOIN (SELECT document_id FROM"
                    " knowledge.document_snapshots GROUP BY 1 HAVING count(*) = 1) one USING (document_id)"
                    " WHERE c.snapshot_outcome = 'changed'")).scalar()
            engine.dispose()
            figures["concurrent_crawls"] = {
                "runs": [{k: r["snapshots"][k] for k in ("new", "changed", "unchanged")} | {"status": r["status"]}
                         for r in runs],
                "sum_new": sum(r["snapshots"]["new"] for r in runs),
                "sum_changed": sum(r["snapshots"]["changed"] for r in runs),
                "snapshot_rows": versions, "changed_rows_for_single_version_documents": false_changes}
    finally:
        admin.dispose()
        server.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
