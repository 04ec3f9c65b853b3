"""Uploads and the contradiction detector: ``python infra/bench/origins.py [--chunks 10000,100000] [--pages 20]``.

One embedded PostgreSQL (pgserver, with pgvector). Two figures:

- **upload to searchable**: a 50-page PDF (fpdf2, a paragraph of a few hundred words a page) and,
  where the machine has it, a real manual (libtasn1.pdf, 36 pages) through
  ``gleaner.origins.uploads.accept`` + ``run_job`` (read, extract, snapshot, ingest, index, detector):
  seconds until the job says ``succeeded``, then one search that finds it.
- **the detector's added cost per new page**, at each ``--chunks`` size: a tenant seeded with that
  many HNSW-indexed chunks (retrieval_search.py's seed: 20 chunks a document), then ``--pages`` new
  pages of ~2 KB markdown landed into it (the snapshot and ingest steps a crawled page takes). Per
  page: the landing's wall time, and the detector's (``find_contradictions`` again on the same
  snapshot: it records nothing twice, so the second call costs what the first did), as a share of
  ingest's time without it. Twice: with the similarity floor as shipped, and with no floor (every
  candidate judged: the worst case).

The load average is reported at the start and the end: the machine is shared. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from corpus import _WORDS
from retrieval_search import _deps, _seed

from gleaner import tenancy
from gleaner.app import Deps
from gleaner.origins import contradictions
from gleaner.origins.landing import land
from gleaner.origins.store import DocumentIdentity
from gleaner.origins.uploads import UploadRequest, accept, run_job
from gleaner.retrieval import search
from gleaner.settings.config import Settings, parse_networks

REAL_PDF = Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf")


def _prose(seed: int, words: int) -> str:
    vocab = sorted(_WORDS)
    out = []
    for i in range(words):
        out.append(vocab[(seed * 7919 + i * 104729) % len(vocab)])
        if i % 14 == 13:
            out[-1] += f" {(seed + i) % 97} euros."
    return " ".join(out)


def _pdf(pages: int) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    for page in range(pages):
        pdf.add_page()
        pdf.multi_cell(0, 6, f"Section {page + 1}. " + _prose(page, 320))
    return bytes(pdf.output())


def upload_to_searchable(deps: Any, name: str, data: bytes, query: str) -> dict[str, Any]:
    started = time.perf_counter()
    accepted = accept(deps, UploadRequest("uploads.test", data, "bench", file_name=name))
    job = run_job(deps, accepted.job_id, "uploads.test", accepted.extracted)
    seconds = time.perf_counter() - started
    with tenancy.scope("uploads.test"):
        hits = search(deps, query, site_domain="uploads.test", limit=3)["results"]
    return {"file": name, "bytes": len(data), "status": job["status"], "seconds": round(seconds, 2),
            "found_by_search": bool(hits) and hits[0]["url"] == f"upload://uploads.test/{name}"}


def detector_cost(deps: Any, pages: int, offset: int) -> dict[str, Any]:
    landed, detected = [], []
    for i in range(pages):
        markdown = f"# Page {offset + i}\n\n" + "\n\n".join(_prose(offset * 100 + i * 5 + p, 70) for p in range(5))
        ident = DocumentIdentity("big.test", f"upload://big.test/new/{offset + i}", f"/new/{offset + i}", "upload")
        started = time.perf_counter()
        result = land(deps, ident, markdown + "\n", extractor="bench")
        landed.append(time.perf_counter() - started)
        with tenancy.scope("big.test"):
            started = time.perf_counter()
            contradictions.find_contradictions(deps, [result.snapshot_id or ""])
            detected.append(time.perf_counter() - started)
    land_ms, detect_ms = statistics.median(landed) * 1000, statistics.median(detected) * 1000
    return {"pages": pages, "landing_ms_p50": round(land_ms, 1), "detector_ms_p50": round(detect_ms, 1),
            "detector_share_of_ingest": round(detect_ms / max(0.001, land_ms - detect_ms), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", default="10000,100000", help="tenant sizes, comma-separated")
    parser.add_argument("--pages", type=int, default=20, help="new pages landed per size and floor")
    parser.add_argument("--pdf-pages", type=int, default=50)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "load_average_at_start": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(), tenancy.all_tenants():
        warnings.simplefilter("ignore")
        import pgserver

        work = Path(tmp)
        server = pgserver.get_server(work / "pg", cleanup_mode="stop")
        try:
            deps = _deps(server, "uploads", work)
            uploads = [upload_to_searchable(deps, f"report-{args.pdf_pages}p.pdf", _pdf(args.pdf_pages),
                                            "section " + _prose(args.pdf_pages - 1, 6))]
            if REAL_PDF.exists():
                uploads.append(upload_to_searchable(deps, REAL_PDF.name, REAL_PDF.read_bytes(),
                                                    "Abstract Syntax Notation One DER"))
            deps.close()
            report["upload_to_searchable"] = uploads
            report["detector"] = []
            for size in (int(s) for s in args.chunks.split(",")):
                seeded = _seed(server, work, size)  # database "big": `size` chunks, HNSW built
                deps = Deps(Settings(data_dir=work / f"big{size}", database_url=server.get_uri(database="big"),
                                     allow_networks=parse_networks("127.0.0.0/8"), embed_model="static"))
                floor = contradictions.MIN_SIMILARITY
                shipped = detector_cost(deps, args.pages, 0)
                contradictions.MIN_SIMILARITY = -1.0  # every candidate judged
                worst = detector_cost(deps, args.pages, args.pages)
                contradictions.MIN_SIMILARITY = floor
                deps.close()
                report["detector"].append({"chunks": size, **seeded, "with_floor": shipped, "no_floor": worst})
                _drop(server, "big")
        finally:
            server.cleanup()
    report["load_average_at_end"] = os.getloadavg()
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


def _drop(server: Any, name: str) -> None:
    import sqlalchemy as sa

    from gleaner.store.backends import db

    sa_url, connect_args = db._pg8000_url(server.get_uri())
    admin = sa.create_engine(sa_url, connect_args=connect_args, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


if __name__ == "__main__":
    main()
