"""Every back-office page of a populated home, read as a person reads it: no stored codes, no ``None``
or Python reprs, no plural slips, and every link it offers opens (issue 44).

The home holds the demo site crawled twice, a replay, an erased page, a composite in production, a
run of a mistyped host that failed, a subscription and a failed delivery.
"""

from __future__ import annotations

import contextlib
import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import httpx

from gleaner.changes import subscriptions
from gleaner.operator import composites
from gleaner.operator.routing import create_composite
from gleaner.runtime.runner import CrawlFailed, crawl, new_request
from gleaner.stages import replay
from gleaner.store.documents.erasure import erase_document
from tests.backoffice.conftest import CHANGED, SITE, Kept

# What must never reach a reader: stored codes, reprs, plural slips, erased digests.
RAW = re.compile(r"\b(hash_changed|etag_changed|lastmod_changed|false_positive|in_validation|needs_review|unlabeled"
                 r"|scrape_policy|plain_fetch|None|True|False|prod)\b|\{'|erased:[0-9a-f]{16}"
                 r"|\b1 (documents|versions|runs|bytes|pages)\b|Errno")
# Pages whose body is the kept page itself (markdown as stored), not the back office's words.
VERBATIM = re.compile(r"/versions/\d+")
MAX_PAGES = 120


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.links: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "pre"):
            self._skip += 1
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.links.append(href)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "pre"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.text.append(data)


def _visible(html: str) -> str:
    page = _Page()
    page.feed(html)
    return " ".join(" ".join(page.text).split())


def _populate(kept: Kept) -> None:
    deps = kept.deps
    replay.replay(deps, kept.first["run_id"], "backoffice")
    about = kept.deps.metadata.document_by_url(kept.site.url + "/about")
    erase_document(deps.provenance, deps.blobs, deps.blocklist, str(about["id"]), "takedown request", "tester")
    made = create_composite(deps, SITE, "Getting started", [kept.site.url + CHANGED], kind="feature_map",
                            actor="cli:tester")
    for status in ("in_validation", "validated", "staged", "prod"):
        composites.move(deps, made.id, status, "cli:tester")
    with contextlib.suppress(CrawlFailed):  # the run is recorded failed, with the resolver's words
        crawl(deps, new_request("http://nosuch.invalid/", site_domain="nosuch.invalid"))
    subscriptions.add(deps.metadata, "http://127.0.0.1:9/hook", site=None, types=(), allow=deps.settings.allow_networks)
    kept.recrawl("/blog")


def test_every_page_speaks_in_words_and_every_link_opens(kept: Kept):
    _populate(kept)
    seen: set[str] = set()
    queue = [(p, "start") for p in ("/ui/", f"/ui/sites/{SITE}/documents", "/ui/search?q=install")]
    problems: list[str] = []
    with httpx.Client(base_url=kept.url, timeout=30) as client:
        while queue and len(seen) < MAX_PAGES:
            path, linked_from = queue.pop(0)
            if path in seen:
                continue
            seen.add(path)
            answer = client.get(path, follow_redirects=True)
            if answer.status_code != 200:
                problems.append(f"{path} (linked from {linked_from}): HTTP {answer.status_code}")
                continue
            if "html" not in answer.headers.get("content-type", ""):
                continue
            page = _Page()
            page.feed(answer.text)
            text = " ".join(" ".join(page.text).split())
            if not VERBATIM.search(path):
                problems += [f"{path}: {m.group(0)!r} in “…{text[max(0, m.start() - 60):m.end() + 60]}…”"
                             for m in RAW.finditer(text)]
            for href in page.links:
                if href.startswith("erased:") or href == "":
                    problems.append(f"{path}: dead link {href!r}")
                target = urljoin(path, href)
                parts = urlsplit(target)
                if not parts.netloc and parts.path.startswith("/ui/") and not parts.path.startswith("/ui/logout"):
                    queue.append((parts.path + (f"?{parts.query}" if parts.query else ""), path))
    assert len(seen) > 20, seen
    assert not problems, "\n".join(problems)


def test_failed_replayed_and_erased_things_say_what_happened(kept: Kept):
    _populate(kept)
    runs = {r["site_domain"] + (":replay" if r.get("replay_of") else ""): r
            for r in reversed(kept.deps.metadata.recent_runs(20))}
    failed = _visible(kept.get(f"/ui/runs/{runs['nosuch.invalid']['run_id']}").text)
    assert "the host name could not be found" in failed and "Errno" not in failed
    assert "Resume run" not in failed and "Replay from stored" not in failed
    replayed = kept.get(f"/ui/runs/{runs[SITE + ':replay']['run_id']}").text
    assert f"{runs[SITE + ':replay']['fetched']} replayed" in replayed
    assert "replayed" in kept.get("/ui/changes").text
    about = kept.deps.metadata.document_by_url(kept.site.url + "/about")
    erased = kept.get(f"/ui/documents/{about['id'] if about else ''}").text if about else None
    if erased is None:  # the erased page is found by its site's listing
        listing = kept.get(f"/ui/sites/{SITE}/documents", status="erased").text
        erased_id = re.search(r'href="/ui/documents/([0-9a-f-]{36})">\(erased page\)', listing).group(1)
        erased = kept.get(f"/ui/documents/{erased_id}").text
    assert "Erased on" in erased and "takedown request" in erased and "by tester" in erased
