"""The bundled demo site: several sections, a sitemap index with a gzipped child,
robots.txt rules, and pages the decider must exclude. Deterministic, so tests
and the demo see the same site; ``changed`` rewrites chosen pages' text.
"""

from __future__ import annotations

import gzip
import random

from gleaner.demosite.testsite import Page

_WORDS = [
    "crawler",
    "sitemap",
    "snapshot",
    "provenance",
    "version",
    "canonical",
    "markdown",
    "archive",
    "feed",
    "robots",
    "policy",
    "budget",
    "latency",
    "schema",
    "pipeline",
    "message",
    "storage",
    "bucket",
    "function",
    "queue",
    "retry",
    "idempotent",
    "immutable",
    "content",
    "hash",
    "ledger",
    "span",
    "citation",
    "document",
    "section",
    "reference",
    "knowledge",
    "source",
    "audit",
    "change",
    "detection",
    "fetch",
    "polite",
    "safe",
    "address",
    "network",
    "host",
    "delay",
    "extract",
    "paragraph",
    "heading",
    "table",
    "list",
    "code",
    "release",
]

DOCS = ("getting-started", "install", "configuration", "api", "troubleshooting")
POSTS = ("2026/why-snapshots", "2026/polite-crawling", "2026/provenance", "2025/launch")


def _sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(n)]
    return words[0].capitalize() + " " + " ".join(words[1:]) + "."


def _paragraphs(seed: str, count: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(_sentence(rng, rng.randint(8, 16)) for _ in range(rng.randint(3, 6))) for _ in range(count)]


def _nav() -> str:
    items = "".join(
        f'<li><a href="{href}">{label}</a></li>'
        for href, label in (
            ("/", "Home"),
            ("/docs/getting-started", "Docs"),
            ("/blog", "Blog"),
            ("/about", "About"),
            ("/pricing", "Pricing"),
            ("/login", "Log in"),
            ("/tag/crawling", "#crawling"),
            ("/private/roadmap", "Roadmap"),
        )
    )
    return f"<header><nav><ul>{items}</ul></nav></header>"


def article(title: str, seed: str, *, extra: str = "", links: tuple[str, ...] = ()) -> str:
    paras = _paragraphs(seed, 6)
    link_html = "".join(f'<li><a href="{h}">{h}</a></li>' for h in links)
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{title} · Demo Co</title>"
        '<link rel="alternate" type="application/rss+xml" href="/feed.xml"></head><body>'
        f"{_nav()}<main><article><h1>{title}</h1>"
        f"<p>{paras[0]}</p><h2>Overview</h2><p>{paras[1]}</p>"
        f"<ul><li>{paras[2][:80]}</li><li>{paras[3][:80]}</li><li>{paras[4][:60]}</li></ul>"
        "<h2>Details</h2><table><tr><th>Setting</th><th>Default</th></tr>"
        "<tr><td>delay</td><td>1 s</td></tr><tr><td>limit</td><td>1000</td></tr></table>"
        "<pre><code>gleaner crawl https://example.com --limit 10\ngleaner runs</code></pre>"
        f"<p>{paras[5]}</p>{extra}"
        f"<ul class=related>{link_html}</ul></article></main>"
        "<aside><h3>Related</h3><a href=/docs/api>API</a></aside>"
        "<footer><p>© Demo Co · <a href=/about>About</a></p></footer></body></html>"
    )


def _thin(title: str) -> str:
    return (
        f"<!doctype html><html><head><title>{title}</title></head><body>{_nav()}"
        f"<main><h1>{title}</h1><form><input name=q></form></main></body></html>"
    )


def _urlset(base: str, paths: list[str]) -> bytes:
    urls = "".join(f"<url><loc>{base}{p}</loc></url>" for p in paths)
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{urls}</urlset>"
    ).encode()


def demo_pages(base: str, *, changed: tuple[str, ...] = ()) -> dict[str, Page]:
    """The site's pages for a server at base (``http://127.0.0.1:PORT``)."""

    def text(path: str) -> str:
        return path + (":v2" if path in changed else "")

    pages: dict[str, Page] = {}
    doc_paths = [f"/docs/{d}" for d in DOCS]
    post_paths = [f"/blog/{p}" for p in POSTS]
    pages["/"] = Page(article("Demo Co", text("/"), links=("/docs/getting-started", "/blog", "/about")))
    for path in doc_paths:
        pages[path] = Page(
            article(
                path.rsplit("/", 1)[-1].replace("-", " ").title(),
                text(path),
                links=tuple(p for p in doc_paths if p != path)[:2],
            )
        )
    pages["/blog"] = Page(article("Blog", text("/blog"), links=tuple(post_paths)))
    for path in post_paths:
        pages[path] = Page(article(path.rsplit("/", 1)[-1].replace("-", " ").title(), text(path)))
    pages["/about"] = Page(article("About us", text("/about")))
    pages["/pricing"] = Page(article("Pricing", text("/pricing")))
    pages["/login"] = Page(_thin("Log in"))
    pages["/tag/crawling"] = Page(_thin("Posts tagged crawling"))
    pages["/private/roadmap"] = Page(article("Secret roadmap", "private"))
    pages["/downloads/brochure"] = Page(b"%PDF-1.4 not really a pdf", content_type="application/octet-stream")
    pages["/robots.txt"] = Page(
        "User-agent: *\nDisallow: /private/\n\nUser-agent: gleaner\nDisallow: /private/\nAllow: /\n\n"
        f"Sitemap: {base}/sitemap_index.xml\n",
        content_type="text/plain",
    )
    pages["/sitemap_index.xml"] = Page(
        '<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<sitemap><loc>{base}/sitemap-docs.xml</loc></sitemap>"
        f"<sitemap><loc>{base}/sitemap-blog.xml.gz</loc></sitemap></sitemapindex>",
        content_type="application/xml",
    )
    listed = ["/", *doc_paths, "/about", "/pricing", "/login", "/downloads/brochure"]
    pages["/sitemap-docs.xml"] = Page(_urlset(base, listed), content_type="application/xml")
    pages["/sitemap-blog.xml.gz"] = Page(
        gzip.compress(_urlset(base, ["/blog", *post_paths, "/tag/crawling", "/private/roadmap"]), mtime=0),
        content_type="application/x-gzip",
    )
    return pages
