"""A small loopback news site for the provenance tests: article pages whose text the test rewrites."""

from __future__ import annotations

from gleaner.demosite.testsite import Page, TestSite

LEAD = ("The city council approved the new harbour budget on Monday after a long debate about the cost of "
        "dredging the old channel and repairing the northern pier.")
BODY = [
    "Councillors argued for three hours about whether the repairs should wait for the next fiscal year, "
    "when the regional grant would cover a larger share of the work.",
    "The harbour master told the meeting that the northern pier has been closed to heavy vehicles since "
    "spring, and that fishing boats now unload at the southern quay instead.",
    "Work is expected to begin in the autumn and to last about eighteen months, with the channel dredged "
    "first so that ferries can keep their timetable through the winter.",
]


def article_html(title: str, paragraphs: list[str], *, reformatted: bool = False) -> str:
    if reformatted:  # the same words in other markup and case: a near-duplicate, not an exact copy
        inner = "".join(f"<div class=p><em>{p.upper()}</em></div><br>" for p in paragraphs)
        return (f"<!doctype html><html><head><title>{title} (reprint)</title></head><body><main><article>"
                f"<h1>{title}</h1>{inner}</article></main></body></html>")
    inner = "".join(f"<p>{p}</p>" for p in paragraphs)
    return (f"<!doctype html><html><head><meta charset=utf-8><title>{title}</title></head><body>"
            f"<nav><a href=/>Home</a></nav><main><article><h1>{title}</h1>{inner}</article></main>"
            "<footer>© Harbour News</footer></body></html>")


def index_html(paths: list[str]) -> str:
    links = "".join(f'<li><a href="{p}">{p}</a></li>' for p in paths)
    return ("<!doctype html><html><head><title>Harbour News</title></head><body><main><h1>Harbour News</h1>"
            "<p>Local reporting on the harbour, the council and the ferries, updated every day by our small "
            "newsroom of volunteers who attend every council meeting in person.</p>"
            f"<ul>{links}</ul></main></body></html>")


def news_site(articles: dict[str, str]) -> TestSite:
    """A site serving ``/`` (linking every article) and the given path -> HTML articles."""
    pages: dict[str, Page] = {"/": Page(index_html(sorted(articles)))}
    pages.update({path: Page(html) for path, html in articles.items()})
    return TestSite(pages, max_seconds=180)


def publish(site: TestSite, path: str, html: str | None, *, status: int = 200) -> None:
    """Change (or add, or with html None remove) one article while the site runs; the index follows."""
    later = max(p.modified for p in site.pages.values()) + 60
    if html is None:
        site.pages[path] = Page("<html><body>gone</body></html>", status=status, modified=later)
    else:
        site.pages[path] = Page(html, modified=later)
    paths = sorted(p for p in site.pages if p != "/")
    site.pages["/"] = Page(index_html(paths), modified=later)
