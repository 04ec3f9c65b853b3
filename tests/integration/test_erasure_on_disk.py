"""After `erase` on the embedded database, no file under GLEANER_HOME holds the erased text or URL:
not the tables' files, not their indexes or statistics, not the write-ahead log."""

from __future__ import annotations

from pathlib import Path

from gleaner.app import Deps
from gleaner.backoffice.api import OPERATOR
from gleaner.bus.local import LocalBus
from gleaner.cli.operating import drain_local
from gleaner.demosite.testsite import TestSite
from gleaner.operator.routing import create_composite
from gleaner.retrieval.ranking import search
from gleaner.runtime.runner import crawl, new_request
from gleaner.store.access.rls import ADMIN_OPTION
from gleaner.store.documents.erasure import erase_document
from gleaner.store.scrub import scrub_after_erasure

from ..conftest import test_settings
from .test_erasure_surfaces import HTML_PATH, HTML_WORDS, PDF_PATH, PDF_WORDS, SITE, _pages


def file_hits(root: Path, needles: list[bytes]) -> list[str]:
    """Every file under root holding a needle (as stored: PostgreSQL keeps short text uncompressed)."""
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                data = path.read_bytes()
            except OSError:  # a socket or a file gone meanwhile
                continue
            hits += [f"{path.relative_to(root)}: {n.decode()}" for n in needles if n in data]
    return hits


def test_after_an_erasure_no_file_of_the_embedded_database_or_its_wal_holds_the_text_or_url(tmp_path: Path):
    deps = Deps(test_settings(tmp_path, None), bus_override=LocalBus(backoff_seconds=0.01))
    home = Path(deps.settings.data_dir)
    try:
        with TestSite(_pages("First edition."), max_seconds=120) as site:
            crawl(deps, new_request(site.url + "/", site_domain=SITE))
            site.pages.update({k: v for k, v in _pages("Second edition.").items() if k != "/"})
            crawl(deps, new_request(site.url + "/", site_domain=SITE))
            create_composite(deps, SITE, "Harbour people", [site.url + HTML_PATH, site.url + "/keep"])
            drain_local(deps)
            from gleaner.agents.tools import cite

            assert search(deps, "Marmalade Lane", site_domain=SITE)["results"]
            cite(deps, OPERATOR, site.url + HTML_PATH, "lives at 17 Marmalade Lane", SITE)
            needles = [b"Marmalade", PDF_WORDS.encode(), b"zanzibar-quokka", b"wallaby-dossier",
                       HTML_WORDS.split(" lives")[0].encode()]
            assert [hit for hit in file_hits(home, needles) if hit.startswith("pg/")]  # the scan sees them
            for url in (site.url + HTML_PATH, site.url + PDF_PATH):
                document = deps.provenance.document_at(url, SITE)
                erase_document(deps.provenance, deps.blobs, deps.blocklist, document["id"], "request 7", "tester")
            # The rows are gone, their bytes are not: once the pages are written out (a checkpoint, a stop),
            # the tables' files hold the dead tuples and index entries, and the WAL the pages as they were.
            with deps.engine.connect().execution_options(isolation_level="AUTOCOMMIT", **{ADMIN_OPTION: True}) as c:
                c.exec_driver_sql("CHECKPOINT")
            left = file_hits(home, needles)
            assert {"pg/base/", "pg/pg_wal/"} <= {hit[:hit.index("/", 3) + 1] for hit in left}, left
            report = scrub_after_erasure(deps.engine)

            assert file_hits(home, needles) == [], report
            assert deps.provenance.document_at(site.url + "/keep", SITE)["current_snapshot_id"] is not None
    finally:
        deps.close()
