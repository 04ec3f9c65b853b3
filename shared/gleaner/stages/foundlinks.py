"""Pages only a rendered DOM links to join the run: sample's and scrape's rendered pages feed discovery.

Map's walk merges a rendered page's links into the walk (render/discovery.py). Sample and scrape
read pages with the browser after map has ended, so the links of the pages they render join the run
here: same host, the run's include globs, its depth (a page at the run's ``max_depth`` is not
followed, as in the walk) and its limit, never an erased URL. Each becomes a document and a ledger row of the run
(``discovered_via = rendered``); the stage then decides it (sample: with the other pages, sampling a
new section; scrape: its section's decision in this run) and fetches it in this run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gleaner.discover.links import extract_links
from gleaner.errors import InvalidInput
from gleaner.store.ledger.discovery import record_discovery
from gleaner.store.ledger.rendering import run_urls
from gleaner.urls import canonicalize, host_of, path_allowed, path_of, section_of, site_domain_of, url_hash

if TYPE_CHECKING:
    from gleaner.app import Deps
    from gleaner.store.ledger.records import RunPage

VIA = "rendered"


def add_rendered_links(deps: Deps, run_id: str, site: str, sources: Sequence[tuple[RunPage, bytes, str]]) -> list[str]:
    """Add the pages the rendered DOMs of ``sources`` (page, DOM, its URL) link to and the run does not hold;
    the canonical URLs added, in the order found."""
    options = deps.run_options(run_id)
    max_depth = int(options.get("max_depth", deps.settings.default_max_depth))
    limit = int(options.get("limit", deps.settings.default_limit))
    include = tuple(str(g) for g in options.get("include", ()))
    erased = deps.blocklist.erased_urls(site)
    found: dict[str, tuple[str, int]] = {}  # canonical -> (as written, depth)
    for page, html, base in sources:
        if page.depth >= max(max_depth, 1):
            continue
        host = host_of(page.canonical_url)
        links = extract_links(html.decode("utf-8", "replace"), base, deps.settings.max_links_per_page)
        for link in links.links:
            try:
                canonical = canonicalize(link)
            except InvalidInput:
                continue
            if host_of(canonical) == host and path_allowed(path_of(canonical), include, ()) \
                    and erased(canonical) is None:
                found.setdefault(canonical, (link, page.depth + 1))
    if not found:
        return []
    size, held = run_urls(deps.engine, run_id, list(found))
    new = [url for url in found if url not in held][:max(0, limit - size)]
    if not new:
        return []
    host = host_of(new[0])
    host_id = deps.metadata.upsert_source_host(site, host, own_site=site_domain_of(new[0]) == site)
    record_discovery(deps.engine, run_id, site, host_id,
                     [(url, url_hash(url), path_of(url), found[url][0], found[url][1], VIA) for url in new])
    deps.metadata.apply_site_rules(site)  # skip rules hold for pages found this way too
    return new


def decide_found(deps: Deps, run_id: str, site: str, urls: Sequence[str], batch_no: int) -> list[str]:
    """Decide pages scrape found in rendered DOMs (their section's verdict in this run; the operator's and URL
    rules first) and put the included ones in ``batch_no``; their document ids, for the batch's next part."""
    from gleaner.decide.port import PageFacts, Verdict
    from gleaner.store.ledger.records import Decision
    from gleaner.store.ledger.rendering import put_in_batch, section_decision

    wanted = set(urls)
    pages = [p for p in deps.metadata.sample_pages(run_id) if p.canonical_url in wanted]
    exclude = tuple(str(g) for g in deps.run_options(run_id).get("exclude", ()))
    decisions: list[Decision] = []
    sections: dict[str, tuple[str, str, str, float, dict[str, object]] | None] = {}
    for page in pages:
        if page.skipped_by_operator:
            decisions.append(Decision(page.document_id, Verdict.EXCLUDE, "operator",
                                      f"scrape_policy=skip ({page.skip_reason or 'operator'})", 1.0,
                                      {"content_kind": "skipped", "evidence": []}))
            continue
        verdict = deps.decider.decide(PageFacts(url=page.canonical_url, path=page.path), exclude)
        if verdict.decision == Verdict.EXCLUDE:
            decisions.append(Decision(page.document_id, verdict.decision, verdict.source, verdict.reason,
                                      verdict.confidence, {"content_kind": verdict.content_kind, "evidence": []}))
            continue
        section = section_of(page.path)
        if section not in sections:
            sections[section] = section_decision(deps.engine, run_id, section)
        known = sections[section]
        if known is None:
            decisions.append(Decision(page.document_id, Verdict.INCLUDE, "system",
                                      f"found in a rendered page; section {section} was not sampled in this run",
                                      0.5, {"content_kind": "unsampled", "evidence": []}))
            continue
        decision, source, reason, confidence, metadata = known
        kept = {k: v for k, v in metadata.items() if k not in ("rendering", "sample")}  # the page's own facts
        decisions.append(Decision(page.document_id, decision, source, f"found in a rendered page; {reason}",
                                  confidence, kept))
    deps.metadata.record_decisions(run_id, decisions)
    included = [d.document_id for d in decisions if d.decision == Verdict.INCLUDE]
    put_in_batch(deps.engine, run_id, batch_no, included)
    return included
