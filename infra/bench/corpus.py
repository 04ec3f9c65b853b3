"""The benchmark corpora: a seeded synthetic site and a copy of real HTML documentation.

``synthetic``: N article pages (navigation, header, footer, a sidebar of links,
5-20 paragraphs, lists, tables, code blocks; 5-80 KB each) across several
sections, a home page, robots.txt, and a sitemap index with one child sitemap
per 500 URLs. Same seed and N, same bytes. File times are fixed, so nginx's
ETag (mtime-size) and Last-Modified are stable across regenerations.

``real``: the HTML documentation a Debian package installs (python3.11-doc's
/usr/share/doc/python3.11/html by default), copied as is, with robots.txt and
sitemaps added. Nobody here wrote it; its pages cost 3-4x more to extract.

``mutate(root, percent, seed)`` rewrites one paragraph of a seeded choice of
pages (new bytes, a later mtime) and returns their paths.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
from pathlib import Path

SECTIONS = ("docs", "guides", "blog", "reference", "changelog", "support")
FIXED_MTIME = 1_700_000_000  # stable ETag / Last-Modified
PER_SITEMAP = 500
DEFAULT_REAL_SOURCE = Path("/usr/share/doc/python3.11/html")

_WORDS = (  # noqa: SIM905 - a vocabulary reads better as text than as a list literal
    "the of and to in is that for it as with was on be by this are or from at an which have not they but all "
    "crawler sitemap snapshot provenance version canonical markdown archive feed robots policy budget latency "
    "schema pipeline message storage bucket function queue retry idempotent immutable content hash ledger span "
    "citation document section reference knowledge source audit change detection fetch polite safe address "
    "network host delay extract paragraph heading table list code release server client request response cache "
    "header body encoding charset parser tree node element attribute value string integer record column index "
    "query transaction commit rollback replica shard partition cluster region zone latency throughput memory "
    "process thread worker scheduler deadline timeout backoff jitter error warning notice config option setting "
    "default override environment variable deploy build test package module import export interface contract "
    "upgrade migration revision history author editor reader customer team project roadmap feature support "
    "question answer example tutorial guide manual handbook chapter page note tip caution important overview"
).split()


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 22))]
    return words[0].capitalize() + " " + " ".join(words[1:]) + "."


def _paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(_sentence(rng) for _ in range(sentences))


def page_paths(n: int) -> list[str]:
    """URL paths of the n article pages, spread over the sections."""
    return [f"/{SECTIONS[i % len(SECTIONS)]}/{_slug(i)}.html" for i in range(n)]


def _slug(i: int) -> str:
    w = _WORDS[30:]
    return f"{w[i % len(w)]}-{w[(i * 7) % len(w)]}-{i:05d}"


def _title(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".html").replace("-", " ").title()


def _chrome_nav() -> str:
    items = "".join(f'<li><a href="/{s}/index.html">{s.title()}</a></li>' for s in SECTIONS)
    return (f'<header class="site"><a class="logo" href="/">Example Docs</a><nav><ul>{items}'
            '<li><a href="/about.html">About</a></li></ul></nav></header>')


def _sidebar(rng: random.Random, paths: list[str], me: int) -> str:
    count = rng.randint(15, 60)
    picks = sorted({(me + rng.randint(1, len(paths))) % len(paths) for _ in range(count)} - {me})
    links = "".join(f'<li><a href="{paths[j]}">{_title(paths[j])}</a></li>' for j in picks)
    return f'<aside class="sidebar"><h3>In this section</h3><ul>{links}</ul></aside>'


def _table(rng: random.Random, rows: int) -> str:
    head = "<tr><th>Option</th><th>Default</th><th>Description</th></tr>"
    body = "".join(f"<tr><td><code>{rng.choice(_WORDS)}_{rng.choice(_WORDS)}</code></td><td>{rng.randint(0, 999)}"
                   f"</td><td>{_sentence(rng)}</td></tr>" for _ in range(rows))
    return f"<table>{head}{body}</table>"


def _code(rng: random.Random, lines: int) -> str:
    text = "\n".join(f"{rng.choice(_WORDS)}_{i} = {rng.choice(_WORDS)}({rng.randint(0, 99)})  # {rng.choice(_WORDS)}"
                     for i in range(lines))
    return f'<pre><code class="language-python">{text}</code></pre>'


# "standard": documentation pages, 6-80 KB with navigation, a sidebar, tables and code (trafilatura ~6 ms a page).
# "cheap": short news-like articles with little chrome, 2-8 KB, cheap to extract: Gleaner's own overhead per page
# weighs more there, which the standard profile's expensive extraction hides (issue 16).
PROFILES = ("standard", "cheap")


def render_cheap_page(seed: int, paths: list[str], i: int, revision: int = 0) -> str:
    """A short article: a title, a few paragraphs, a one-line header and footer."""
    rng = random.Random(f"cheap:{seed}:{i}")
    title = _title(paths[i])
    blocks = [f"<p>{_paragraph(rng, rng.randint(2, 5))}</p>" for _ in range(rng.randint(3, 7))]
    if revision:
        blocks[0] = f"<p>Revised (revision {revision}). {_paragraph(random.Random(f'{seed}:{i}:r{revision}'), 3)}</p>"
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title></head><body>'
            '<header><a href="/">Example News</a></header>'
            f'<main><article><h1>{title}</h1>{"".join(blocks)}</article></main>'
            "<footer><p>© Example News</p></footer></body></html>")


def render_page(seed: int, paths: list[str], i: int, revision: int = 0, profile: str = "standard") -> str:
    """One article page of the profile; revision > 0 rewrites its first paragraph."""
    if profile == "cheap":
        return render_cheap_page(seed, paths, i, revision)
    rng = random.Random(f"{seed}:{i}")
    target = int(min(80_000, max(6_000, rng.lognormvariate(9.9, 0.6))))  # median ~20 KB
    path = paths[i]
    title = _title(path)
    paragraphs = rng.randint(5, 20)
    sidebar = _sidebar(rng, paths, i)
    chrome = len(sidebar) + 2_500
    extras = ["list", "table", "code", "list", "table", "code"][: rng.randint(2, 6)]
    # Spread the remaining bytes over paragraphs and extras (~90 bytes per sentence, tags included).
    per_block = max(300, (target - chrome) // (paragraphs + len(extras) * 2))
    sentences = max(2, per_block // 90)
    blocks: list[str] = []
    for p in range(paragraphs):
        if p and p % 4 == 0:
            blocks.append(f"<h2>{_sentence(rng)[:48].rstrip('.')}</h2>")
        blocks.append(f"<p>{_paragraph(rng, sentences)}</p>")
        if extras and p % 3 == 1:
            kind = extras.pop()
            if kind == "list":
                blocks.append("<ul>" + "".join(f"<li>{_sentence(rng)}</li>" for _ in range(rng.randint(3, 10)))
                              + "</ul>")
            elif kind == "table":
                blocks.append(_table(rng, max(3, per_block // 120)))
            else:
                blocks.append(_code(rng, max(4, per_block // 60)))
    if revision:
        blocks[0] = f"<p>Revised (revision {revision}). {_paragraph(random.Random(f'{seed}:{i}:r{revision}'), 3)}</p>"
    section = path.split("/")[1]
    crumbs = (f'<nav class="breadcrumbs"><a href="/">Home</a> \u203a <a href="/{section}/index.html">'
              f"{section.title()}</a> \u203a {title}</nav>")
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title} · Example Docs</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="stylesheet" href="/static/site.css"></head><body>'
        f'{_chrome_nav()}<div class="layout">{sidebar}<main><article>{crumbs}<h1>{title}</h1>'
        f'{"".join(blocks)}</article></main></div>'
        '<footer class="site"><p>© Example Docs · <a href="/about.html">About</a> · '
        '<a href="/privacy.html">Privacy</a></p><p>Built with a static site generator.</p></footer>'
        "</body></html>"
    )


def _index_page(title: str, links: list[str]) -> str:
    items = "".join(f'<li><a href="{p}">{_title(p)}</a></li>' for p in links)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title></head><body>'
            f'{_chrome_nav()}<main><h1>{title}</h1><p>The pages of this part of the site.</p><ul>{items}</ul>'
            "</main></body></html>")


def _write(root: Path, path: str, data: str | bytes, mtime: int = FIXED_MTIME) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    os.utime(target, (mtime, mtime))


def _sitemaps(root: Path, base: str, paths: list[str]) -> None:
    children = []
    for k in range(0, len(paths), PER_SITEMAP):
        name = f"/sitemaps/pages-{k // PER_SITEMAP:03d}.xml"
        urls = "".join(f"<url><loc>{base}{p}</loc></url>" for p in paths[k:k + PER_SITEMAP])
        _write(root, name, '<?xml version="1.0" encoding="UTF-8"?>'
               f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>')
        children.append(name)
    entries = "".join(f"<sitemap><loc>{base}{c}</loc></sitemap>" for c in children)
    _write(root, "/sitemap_index.xml", '<?xml version="1.0" encoding="UTF-8"?>'
           f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</sitemapindex>')
    _write(root, "/robots.txt", f"User-agent: *\nDisallow: /private/\nAllow: /\n\nSitemap: {base}/sitemap_index.xml\n")


def generate_synthetic(root: Path, base: str, n: int, seed: int = 1, profile: str = "standard") -> dict[str, object]:
    """Write the synthetic site of a profile for a server at base; returns a manifest (also manifest.json)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r} (one of {', '.join(PROFILES)})")
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    paths = page_paths(n)
    total = 0
    for i in range(n):
        html = render_page(seed, paths, i, profile=profile)
        total += len(html.encode("utf-8"))
        _write(root, paths[i], html)
    for section in SECTIONS:
        members = [p for p in paths if p.startswith(f"/{section}/")]
        _write(root, f"/{section}/index.html", _index_page(section.title(), members[:200]))
    _write(root, "/index.html", _index_page("Example Docs", [f"/{s}/index.html" for s in SECTIONS]))
    _sitemaps(root, base, paths)
    manifest = {"kind": "synthetic", "profile": profile, "seed": seed, "pages": n, "page_bytes": total,
                "paths": paths}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return manifest


def generate_real(root: Path, base: str, source: Path = DEFAULT_REAL_SOURCE, limit: int | None = None,
                  ) -> dict[str, object]:
    """Copy real HTML documentation under /pydoc/ and add robots.txt and sitemaps for it."""
    if not source.is_dir():
        raise SystemExit(f"bench: {source} is missing; install Debian's python3-doc (apt-get install python3-doc)")
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    # Index pages (genindex*) and very large pages are left out: one 1.5 MB index costs seconds to extract.
    files = sorted(p for p in source.rglob("*.html")
                   if p.is_file() and 5_000 <= p.stat().st_size <= 250_000 and not p.name.startswith("genindex"))
    if limit:
        files = files[:limit]
    paths: list[str] = []
    total = 0
    for f in files:
        rel = "/pydoc/" + f.relative_to(source).as_posix()
        data = f.read_bytes()
        total += len(data)
        _write(root, rel, data)
        paths.append(rel)
    for static in ("_static",):  # stylesheets and scripts the pages refer to (not crawled: not HTML)
        if (source / static).is_dir():
            shutil.copytree(source / static, root / "pydoc" / static, dirs_exist_ok=True)
    _write(root, "/index.html", _index_page("Python documentation", ["/pydoc/index.html"]))
    _sitemaps(root, base, paths)
    manifest = {"kind": "real", "source": str(source), "pages": len(paths), "page_bytes": total, "paths": paths}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return manifest


def mutate(root: Path, percent: float, seed: int = 1, revision: int = 1) -> list[str]:
    """Rewrite the first paragraph of a seeded percent of the synthetic pages; returns their paths."""
    manifest = json.loads((root / "manifest.json").read_text())
    if manifest["kind"] != "synthetic":
        raise ValueError("mutate works on the synthetic corpus")
    paths: list[str] = manifest["paths"]
    count = max(1, round(len(paths) * percent / 100))
    chosen = sorted(random.Random(f"mutate:{seed}:{revision}").sample(range(len(paths)), count))
    for i in chosen:
        page = render_page(manifest["seed"], paths, i, revision, manifest.get("profile", "standard"))
        _write(root, paths[i], page, FIXED_MTIME + 1000 * revision)
    return [paths[i] for i in chosen]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--base", required=True, help="the server's origin, e.g. http://127.0.0.1:8080")
    parser.add_argument("--kind", choices=("synthetic", "real"), default="synthetic")
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", choices=PROFILES, default="standard", help="synthetic pages' profile")
    parser.add_argument("--mutate", type=float, help="instead: mutate this percent of an existing corpus")
    args = parser.parse_args()
    if args.mutate is not None:
        print(json.dumps(mutate(args.root, args.mutate, args.seed)))
    elif args.kind == "real":
        print(json.dumps({k: v for k, v in generate_real(args.root, args.base).items() if k != "paths"}))
    else:
        print(json.dumps({k: v for k, v in generate_synthetic(args.root, args.base, args.pages, args.seed,
                                                                            args.profile).items()
                          if k != "paths"}))


if __name__ == "__main__":
    main()
