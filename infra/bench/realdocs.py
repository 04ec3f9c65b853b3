"""Search quality on real documentation, against BM25: one command.

    python infra/bench/realdocs.py [--sets nodejs,valgrind,sphinx,docutils,rustref,editions,flask,git,paraphrase]
                                   [--model static|minilm] [--rerank] [--keep DIR] [--label NAME]

For each set: its pages are served on loopback (the documentation Debian installs under
/usr/share/doc: ``apt-get install nodejs-doc valgrind sphinx-doc docutils-doc rust-doc python-flask-doc
git-doc``;
or the tests'
paraphrase site), crawled with ``gleaner crawl`` as a user would (own GLEANER_HOME, GLEANER_ALLOW_NETWORKS=127.0.0.0/8,
--delay 0), and the set's hand-written questions (infra/bench/realdocs/*.json: each names the page or
pages that answer it) are asked through ``gleaner.retrieval.search``. The same pages, fetched from the
same server, go through trafilatura into SQLite FTS5 (porter tokenizer, one row per page) and are
ranked by its ``bm25()`` for an any-word query: the baseline. Metrics are page level: recall@1/3/10
(a listed page among the first k distinct pages), MRR and nDCG@10 (binary relevance, every listed
page relevant).

Each site is crawled whole, as a user's default crawl would: the Node.js reference's ``all.html`` (the
whole manual on one page) is kept, found to be an aggregate and left out of search, and BM25 indexes
the same pages Gleaner searches (a set may still name ``exclude`` globs for its crawl).

``--rerank`` asks with ``GLEANER_RERANK=minilm`` (the transformer's second look at each answer's first
pages: gleaner.retrieval.rerank).

``--keep DIR`` keeps each set's GLEANER_HOME under DIR and reuses it next time (no second crawl):
for trying ranking changes on the same stored pages. nodejs and sphinx (Sphinx 5.3's manual from
Debian's sphinx-doc: 133 pages with its 890 kB changelog and the viewcode source pages) are the
tuning sets; valgrind, docutils (Debian's docutils-doc: 62 XHTML pages), the Rust Reference and the
Rust Edition Guide (rust-doc's mdBook books; the guide keeps 23 pages, its other files forward),
Flask's (python-flask-doc: Sphinx with the Pallets theme) and Git's (git-doc: AsciiDoc manual pages
and guides; both added in session 23) are check sets, never tuned on; the last five were written as
users ask, by someone who had not seen the search code.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import math
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "shared"))

SETS = {name: HERE / "realdocs" / f"{name}.json"
        for name in ("nodejs", "valgrind", "sphinx", "docutils", "rustref", "editions", "flask", "git")}
SITE = {"nodejs": "nodejs.docs.test", "valgrind": "valgrind.docs.test", "sphinx": "sphinx.docs.test",
        "docutils": "docutils.docs.test", "rustref": "rustref.docs.test", "editions": "editions.docs.test",
        "flask": "flask.docs.test", "git": "git.docs.test", "paraphrase": "topics.test"}
# Debian's, for the source
PACKAGE = {"nodejs": "nodejs-doc", "valgrind": "valgrind", "sphinx": "sphinx-doc", "docutils": "docutils-doc",
           "rustref": "rust-doc", "editions": "rust-doc", "flask": "python-flask-doc", "git": "git-doc"}
DEPTH = 10
PAGES_ASKED = 10  # distinct pages the metrics look at


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def serve_directory(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def page_of(url: str) -> str:
    """A hit's page as the question files name it: the path below the server's root ('' = index); the
    port is left out, so a kept home's urls still name their pages when served on another port."""
    return urllib.parse.urlsplit(url).path.lstrip("/") or "index.html"


def crawl(env: dict[str, str], url: str, site: str, exclude: list[str]) -> dict[str, Any]:
    cmd = [sys.executable, "-c", "from gleaner.cli import main; main()", "crawl", url, "--site-domain", site,
           "--delay", "0",
           "--max-depth", str(DEPTH), "--limit", "5000", "--json"]
    for glob in exclude:
        cmd += ["--exclude", glob]
    started = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    seconds = time.monotonic() - started
    if done.returncode not in (0, 3):
        raise SystemExit(f"gleaner crawl failed ({done.returncode}):\n{done.stderr[-3000:]}")
    summary = json.loads(done.stdout)
    return {"seconds": round(seconds, 1), "fetched": summary.get("fetched"), "status": summary.get("status")}


def gleaner_env(home: Path, model: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"GLEANER_HOME": str(home), "GLEANER_ALLOW_NETWORKS": "127.0.0.0/8", "GLEANER_EMBED_MODEL": model,
                "PYTHONPATH": os.pathsep.join([str(REPO / "shared"), env.get("PYTHONPATH", "")])})
    return env


def rank_gleaner(env: dict[str, str], site: str, questions: list[str]) -> tuple[list[list[str]],
                                                                                         list[float], list[str]]:
    """Each question's distinct pages, best first, through search(); its latencies; the stored urls."""
    os.environ.update(env)
    import sqlalchemy as sa

    from gleaner import tenancy
    from gleaner.app import Deps
    from gleaner.retrieval import search
    from gleaner.settings.config import Settings

    with tenancy.all_tenants():
        deps = Deps(Settings.from_env(os.environ))
        try:
            with deps.engine.connect() as conn:
                urls = [r[0] for r in conn.execute(sa.text(
                    "SELECT canonical_url FROM knowledge.documents WHERE site_domain = :s AND status = 'active'"
                    " AND kb_indexed"), {"s": site})]
            search(deps, "warm up", site_domain=site, limit=10)
            ranked, took = [], []
            for q in questions:
                started = time.perf_counter()
                answer = search(deps, q, site_domain=site, limit=30)
                took.append(time.perf_counter() - started)
                pages: list[str] = []
                for hit in answer["results"]:
                    p = page_of(hit["url"])
                    if p not in pages:
                        pages.append(p)
                ranked.append(pages[:PAGES_ASKED])
        finally:
            deps.close()
    return ranked, took, urls


def rank_bm25(base: str, urls: list[str], questions: list[str]) -> list[list[str]]:
    """SQLite FTS5 bm25() over trafilatura's text of the same pages, one row per page, any-word query."""
    import trafilatura

    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE pages USING fts5(page UNINDEXED, body, tokenize='porter unicode61')")
    for url in urls:
        with urllib.request.urlopen(url, timeout=30) as response:  # the bytes Gleaner fetched
            html = response.read().decode("utf-8", "replace")
        text = trafilatura.extract(html) or ""
        db.execute("INSERT INTO pages VALUES (?, ?)", (page_of(url), text))
    ranked = []
    for q in questions:
        words = re.findall(r"\w+", q.lower())
        match = " OR ".join(f'"{w}"' for w in words)
        rows = db.execute("SELECT page FROM pages WHERE pages MATCH ? ORDER BY bm25(pages) LIMIT ?",
                          (match, PAGES_ASKED)).fetchall()
        ranked.append([r[0] for r in rows])
    return ranked


def metrics(ranked: list[list[str]], relevant: list[list[str]]) -> dict[str, float]:
    n = len(ranked)
    out: dict[str, float] = {}
    for k in (1, 3, 10):
        out[f"recall@{k}"] = sum(1 for r, rel in zip(ranked, relevant, strict=True) if set(r[:k]) & set(rel)) / n
    mrr = ndcg = 0.0
    for r, rel in zip(ranked, relevant, strict=True):
        first = next((i for i, p in enumerate(r) if p in rel), None)
        mrr += 0.0 if first is None else 1 / (first + 1)
        dcg = sum(1 / math.log2(i + 2) for i, p in enumerate(r[:10]) if p in rel)
        ideal = sum(1 / math.log2(i + 2) for i in range(min(len(rel), 10)))
        ndcg += dcg / ideal
    out["MRR"] = mrr / n
    out["nDCG@10"] = ndcg / n
    return {k: round(v, 3) for k, v in out.items()}


def run_set(name: str, model: str, work: Path, reuse: bool, rerank: bool = False) -> dict[str, Any]:
    home = work / f"{name}-{model}"
    fresh = not (reuse and (home / "pg").exists())
    home.mkdir(parents=True, exist_ok=True)
    env = gleaner_env(home, model)
    site = SITE[name]
    if name == "paraphrase":
        from tests.integration.paraphrase_site import QUESTIONS, topic_pages

        from gleaner.demosite.testsite import TestSite

        server: Any = TestSite(topic_pages(), max_seconds=3600).start()
        base = server.url
        questions = list(QUESTIONS)
        relevant = [[QUESTIONS[q].lstrip("/")] for q in questions]
        start, exclude = base + "/", []
    else:
        spec = json.loads(SETS[name].read_text())
        if not Path(spec["source"]).is_dir():
            raise SystemExit(f"realdocs: {spec['source']} is missing; apt-get install {PACKAGE[name]}")
        server, base = serve_directory(Path(spec["source"]))
        questions = [item["q"] for item in spec["questions"]]
        relevant = [item["pages"] for item in spec["questions"]]
        start, exclude = f"{base}/{spec['start']}", spec.get("exclude", [])
    try:
        report: dict[str, Any] = {"questions": len(questions), "model": model, "rerank": rerank}
        if fresh:
            report["crawl"] = crawl(env, start, site, exclude)
        ranked, took, urls = rank_gleaner({**env, "GLEANER_RERANK": "minilm" if rerank else "none"}, site, questions)
        live = [base + (urllib.parse.urlsplit(u).path or "/") for u in urls]
        baseline = rank_bm25(base, live, questions)
        report["pages"] = len(urls)
        report["gleaner"] = metrics(ranked, relevant)
        report["bm25"] = metrics(baseline, relevant)
        took.sort()
        report["search_ms"] = {"median": round(took[len(took) // 2] * 1000, 1),
                               "p95": round(took[min(len(took) - 1, int(len(took) * 0.95))] * 1000, 1)}
        report["misses_at_3"] = [{"q": q, "want": rel, "gleaner": r[:3], "bm25": b[:3]}
                                 for q, rel, r, b in zip(questions, relevant, ranked, baseline, strict=True)
                                 if not set(r[:3]) & set(rel)]
    finally:
        if name == "paraphrase":
            server.stop()
        else:
            server.shutdown()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="nodejs,valgrind,sphinx,docutils,rustref,editions,flask,git,paraphrase")
    parser.add_argument("--model", default="static", choices=["static", "minilm"])
    parser.add_argument("--keep", type=Path, help="keep (and reuse) each set's GLEANER_HOME under this directory")
    parser.add_argument("--rerank", action="store_true", help="search with GLEANER_RERANK=minilm")
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="gleaner-realdocs-"))
    report: dict[str, Any] = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "model": args.model,
                              "label": args.label, "rerank": args.rerank, "sets": {}}
    for name in args.sets.split(","):
        report["sets"][name] = run_set(name, args.model, work, reuse=args.keep is not None, rerank=args.rerank)
    print(f"{'set':<11} {'system':<8} {'pages':>5} {'qs':>3}  r@1   r@3   r@10  MRR   nDCG@10  p95 ms")
    for name, r in report["sets"].items():
        for system in ("gleaner", "bm25"):
            m = r[system]
            ms = r["search_ms"]["p95"] if system == "gleaner" else ""
            print(f"{name:<11} {system:<8} {r['pages']:>5} {r['questions']:>3}  {m['recall@1']:.2f}"
                  f"  {m['recall@3']:.2f}"
                  f"  {m['recall@10']:.2f}  {m['MRR']:.2f}  {m['nDCG@10']:.2f}     {ms}")
    kind = args.model + ("-rerank" if args.rerank else "")
    out = HERE / "results" / f"{report['when'][:10]}-realdocs-{kind}{'-' + args.label if args.label else ''}.json"
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
