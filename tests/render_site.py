"""A loopback site whose pages are written by JavaScript, for the rendering tests and the bench.

``/app/*`` is a single-page application: the HTML is an empty shell and ``/static/app.js`` writes
the content and links after a ``fetch()`` of ``/api/content``. ``/docs/*`` is plain HTML with the
same amount of text. ``/trap`` tries to reach another loopback address, the metadata server, a
path robots.txt disallows, a WebSocket, a POST and a pop-up. ``/forever`` holds one script until
after any budget. ``/scroll`` appends a page of items every time it is scrolled to the end, forever.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from gleaner.demosite.testsite import Page, TestSite

ROBOTS = "User-agent: *\nDisallow: /private/\n"
_TEXT = ("rendered text arrives after the script asks the server for the page content and writes it "
         "into the document so a plain fetch sees only an empty shell")
_WORDS = _TEXT.split()


def paragraphs(name: str, n: int = 4) -> list[str]:
    return [" ".join(_WORDS[(i + j) % len(_WORDS)] for j in range(40)) + f" {name} part {i}." for i in range(n)]


SHELL = ("<!doctype html><html><head><title>App</title><script src=\"/static/app.js\" defer></script></head>"
         "<body><nav><a href=\"/\">Home</a></nav><div id=\"root\">Loading…</div></body></html>")
APP_JS = """
fetch('/api/content?page=' + encodeURIComponent(location.pathname)).then(r => r.json()).then(data => {
  const root = document.getElementById('root');
  root.innerHTML = '';
  const article = document.createElement('article');
  const add = (tag, text) => {
    const e = document.createElement(tag); e.textContent = text; article.appendChild(e); return e;
  };
  add('h1', data.title);
  for (const text of data.paragraphs) add('p', text);
  for (const href of data.links) add('a', 'see ' + href).href = href;
  root.appendChild(article);
});
"""


def _static(name: str) -> str:
    body = "".join(f"<p>{p}</p>" for p in paragraphs(name))
    return f"<!doctype html><html><head><title>{name}</title></head><body><article><h1>{name}</h1>{body}" \
           "</article></body></html>"


def _content(h: BaseHTTPRequestHandler) -> None:
    page = parse_qs(urlsplit(h.path).query).get("page", ["/app/"])[0]
    name = page.rstrip("/").rsplit("/", 1)[-1] or "app"
    data = {"title": f"App page {name}", "paragraphs": paragraphs(f"app {name}"),
            "links": [f"/app/{name}-child", "/app/linked-only-by-script"]}
    _send(h, json.dumps(data).encode(), "application/json")


def _scroll_items(h: BaseHTTPRequestHandler) -> None:
    n = int(parse_qs(urlsplit(h.path).query).get("n", ["0"])[0])
    items = [f"Item {n}-{i}: " + " ".join(_WORDS[:12]) for i in range(20)]
    _send(h, json.dumps(items).encode(), "application/json")


def _slow(h: BaseHTTPRequestHandler) -> None:
    time.sleep(6.0)  # past every budget in the tests; bounded, so the server's thread ends
    _send(h, b"document.title = 'never';", "text/javascript")


def _send(h: BaseHTTPRequestHandler, body: bytes, content_type: str) -> None:
    h.send_response(200)
    h.send_header("Content-Type", content_type)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


SCROLL = """<!doctype html><html><head><title>Feed</title></head><body><h1>Endless feed</h1><div id="feed"></div>
<script>
let n = 0, loading = false;
function more() {
  if (loading) return; loading = true;
  fetch('/api/items?n=' + n).then(r => r.json()).then(items => {
    for (const text of items) { const p = document.createElement('p'); p.style.height = '200px'; p.textContent = text;
      document.getElementById('feed').appendChild(p); }
    n += 1; loading = false;
  });
}
more();
window.addEventListener('scroll', () => { if (innerHeight + scrollY >= document.body.scrollHeight - 50) more(); });
</script></body></html>"""


def trap_page(trap_url: str) -> str:
    """A page whose script reaches for places the gate must refuse, then writes what it could read."""
    return f"""<!doctype html><html><head><title>Trap</title></head><body><h1>Trap page</h1>
<p id="out">{' '.join(paragraphs('trap', 2))}</p>
<script>
const tries = ['{trap_url}/steal', 'http://169.254.169.254/computeMetadata/v1/', '/private/secret'];
Promise.allSettled(tries.map(u => fetch(u).then(r => r.text()))).then(results => {{
  const p = document.createElement('p'); p.id = 'results';
  p.textContent = 'results: ' + results.map(r => r.status).join(',');
  document.body.appendChild(p);
}});
fetch('/api/content', {{method: 'POST', body: 'x'}}).catch(() => null);
try {{ new WebSocket('ws://127.0.0.1:9/socket'); }} catch (e) {{}}
window.open('{trap_url}/popup');
</script></body></html>"""


FOREVER = ("<!doctype html><html><head><title>Forever</title></head><body><h1>Never finishes</h1>"
           f"<p>{' '.join(paragraphs('forever', 2))}</p><script src=\"/static/slow.js\" async></script>"
           "<script>document.body.insertAdjacentHTML('beforeend', '<p>written before load ended</p>');</script>"
           "</body></html>")


# What a page can leave for the next one in a browser: localStorage (per origin) and a cookie (per host,
# whatever the port). The page says what it found before leaving its own.
STORAGE = ("<!doctype html><html><head><title>Storage</title></head><body><h1>Storage</h1><p id=\"out\"></p><script>"
           "const seen = localStorage.getItem('seen') || 'nothing', cookie = document.cookie || 'none';"
           "localStorage.setItem('seen', 'port' + location.port);"
           "document.cookie = 'who=port' + location.port + '; path=/';"
           "document.getElementById('out').textContent = 'storage saw ' + seen + ' cookie saw ' + cookie;"
           "</script></body></html>")


def pages(trap_url: str = "http://127.0.0.2:9") -> dict[str, Page]:
    site = {
        "/robots.txt": Page(ROBOTS, content_type="text/plain"),
        "/": Page("<html><body><a href=\"/app/one\">app</a> <a href=\"/docs/a\">docs</a></body></html>"),
        "/static/app.js": Page(APP_JS, content_type="text/javascript"),
        "/api/content": Page("", handler=_content),
        "/api/items": Page("", handler=_scroll_items),
        "/static/slow.js": Page("", handler=_slow),
        "/private/secret": Page("secret", content_type="text/plain"),
        "/trap": Page(trap_page(trap_url)),
        "/forever": Page(FOREVER),
        "/scroll": Page(SCROLL),
        "/storage": Page(STORAGE),
    }
    site["/app/linked-only-by-script"] = Page(SHELL)
    for name in ("one", "two", "three"):
        site[f"/app/{name}"] = Page(SHELL)
        site[f"/docs/{name}"] = Page(_static(f"docs {name}"))
    return site


# What a crawl of the site finds: an SPA section and a static one (the trap pages are reached directly).
CRAWLED = ("/app/one", "/app/two", "/docs/one", "/docs/two")


@contextmanager
def render_site(trap_url: str = "http://127.0.0.2:9", max_seconds: float = 120) -> Iterator[TestSite]:
    with TestSite(pages(trap_url), max_seconds=max_seconds) as site:
        urls = "".join(f"<url><loc>{site.url}{path}</loc></url>" for path in CRAWLED)
        site.pages["/sitemap.xml"] = Page('<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/'
                                          f'sitemap/0.9">{urls}</urlset>', content_type="application/xml")
        site.pages["/robots.txt"] = Page(ROBOTS + f"Sitemap: {site.url}/sitemap.xml\n", content_type="text/plain")
        yield site
