"""Stage 2, sample: decide include / exclude / needs_review for every URL of a run.

URL rules first (exclude globs, login/cart/search/tag/pagination/feed/asset
patterns, an operator's skip). Then the remaining URLs are grouped by path
section (first segment); one page per section is fetched and extracted as the
section's sample (stored at runs/{run}/samples/{page_id}.md), and the decider's
verdict on the sample stands for its section. Excludes are materialised as
documents.scrape_policy='skip'. Include pages are cut into batches of at most
100 and enqueued as scrape tasks named run id + batch number.
"""

from __future__ import annotations

import contextlib
import logging
from collections import OrderedDict
from typing import Any

from gleaner.app import Deps
from gleaner.decide.port import PageDecision, PageFacts
from gleaner.errors import BlobConflict
from gleaner.extract.html import extract_html
from gleaner.fetch.budget import Spent
from gleaner.fetch.fetcher import Fetcher
from gleaner.fetch.types import ContentKind, FetchOutcome, FetchRequest
from gleaner.messages import CrawlMapped, ScrapeBatch
from gleaner.store.blobs import sample_key
from gleaner.store.metadata import Decision, RunPage

log = logging.getLogger(__name__)


def section_of(path: str) -> str:
    parts = [p for p in path.split("/") if p]
    return "/" + parts[0] if parts else "/"


def handle(message: CrawlMapped, deps: Deps) -> list[ScrapeBatch]:
    meta = deps.metadata
    run_id = message.run_id
    status = meta.run_status(run_id)
    if status in ("scraping", "finished", "partial"):
        return _enqueue(deps, message, meta.batches_of(run_id))  # redelivery: task names dedupe
    if status not in ("mapped", "sampling"):
        log.warning("run %s is %s; nothing to sample", run_id, status)
        return []
    meta.set_run_status(run_id, "sampling", only_from=("mapped",))
    options = _options(deps, run_id)
    exclude = tuple(str(g) for g in options.get("exclude", ()))
    pages = meta.run_pages(run_id)
    decisions: dict[str, Decision] = {}
    sections: OrderedDict[str, list[RunPage]] = OrderedDict()
    for page in pages:
        if page.scrape_policy == "skip" and not (page.skip_reason or "").startswith("rule: "):
            decisions[page.document_id] = Decision(page.document_id, "exclude", "operator",
                                                   f"scrape_policy=skip ({page.skip_reason or 'operator'})", 1.0,
                                                   {"content_kind": "skipped", "evidence": []})
            continue
        verdict = deps.decider.decide(PageFacts(url=page.canonical_url, path=page.path), exclude)
        if verdict.decision == "exclude":
            decisions[page.document_id] = _decision(page, verdict)
        else:
            sections.setdefault(section_of(page.path), []).append(page)
    with deps.new_fetcher(run_id=run_id, spent=Spent(*meta.run_spent(run_id))) as fetcher:
        for section, members in sections.items():
            sample, verdict, uri, error = _sample_section(deps, fetcher, message, members, exclude)
            for page in members:
                if page is sample or sample is None:
                    decisions[page.document_id] = _decision(page, verdict, uri, error)
                else:
                    inherited = PageDecision(
                        verdict.decision, f"section {section} sampled via {sample.path}: {verdict.reason}",
                        round(verdict.confidence * 0.9, 3), verdict.source, verdict.content_kind, verdict.evidence)
                    decisions[page.document_id] = _decision(page, inherited)
    meta.record_decisions(run_id, list(decisions.values()))
    include = [p.document_id for p in pages if decisions[p.document_id].decision == "include"]
    size = deps.settings.scrape_batch_size
    batches = [include[i:i + size] for i in range(0, len(include), size)]
    if not meta.start_scrape(run_id, batches):
        batches = meta.batches_of(run_id)
    scheduled = _enqueue(deps, message, batches)
    if not batches:
        meta.try_finish_run(run_id)
    return scheduled


def _options(deps: Deps, run_id: str) -> dict[str, Any]:
    import sqlalchemy as sa

    with deps.metadata.engine.connect() as conn:
        options = conn.execute(sa.text("SELECT options FROM knowledge.crawl_runs WHERE id = :r"),
                               {"r": run_id}).scalar()
    return dict(options or {})


def _enqueue(deps: Deps, message: CrawlMapped, batches: list[list[str]]) -> list[ScrapeBatch]:
    tasks = [ScrapeBatch(run_id=message.run_id, site_domain=message.site_domain, batch_no=no,
                         document_ids=tuple(ids)) for no, ids in enumerate(batches)]
    for task in tasks:
        deps.bus.enqueue(task)
    return tasks


def _decision(page: RunPage, verdict: PageDecision, uri: str | None = None, error: str | None = None) -> Decision:
    return Decision(page.document_id, verdict.decision, verdict.source, verdict.reason, verdict.confidence,
                    {"content_kind": verdict.content_kind, "evidence": list(verdict.evidence)}, uri, error)


# A section whose first pages fail to fetch is not judged on a failure: try a few before giving up.
SAMPLE_ATTEMPTS = 3


def _sample_section(deps: Deps, fetcher: Fetcher, message: CrawlMapped, members: list[RunPage],
                    exclude: tuple[str, ...]) -> tuple[RunPage | None, PageDecision, str | None, str | None]:
    """Fetch the first robots-allowed, fetchable page of a section and decide on it."""
    candidates = [p for p in members if fetcher.robots(p.fetch_url).allows(p.fetch_url)]
    errors: list[str] = []
    for sample in candidates[:SAMPLE_ATTEMPTS]:
        result = fetcher.fetch(FetchRequest(sample.fetch_url, accept=(ContentKind.HTML,)))
        if result.outcome is FetchOutcome.EXHAUSTED:
            # The run's budget ran out: that says nothing about the section. Include its pages so the
            # scrape stage records each one exhausted and the run ends partial, instead of dropping them.
            verdict = PageDecision("include", f"sample not fetched ({result.reason}); the fetcher decides per URL",
                                   0.5, content_kind="unsampled")
            return None, verdict, None, f"{result.outcome}: {result.reason}"
        if result.outcome is FetchOutcome.REFUSED_CONTENT:
            facts = PageFacts(url=sample.canonical_url, path=sample.path, sampled=True,
                              content_type=result.content_type, fetch_outcome=str(result.outcome))
            return sample, deps.decider.decide(facts, exclude), None, f"{result.outcome}: {result.reason}"
        if result.outcome is not FetchOutcome.FETCHED:
            errors.append(f"{sample.path}: {result.outcome} {result.reason}".strip())
            continue
        extracted = extract_html(result.text(), result.final_url or sample.fetch_url)
        facts = PageFacts(url=sample.canonical_url, path=sample.path, sampled=True,
                          content_type=result.content_type, fetch_outcome=str(result.outcome),
                          main_text_chars=extracted.main_text_chars, title=extracted.title)
        key = sample_key(message.site_domain, message.run_id, sample.url_hash)
        # A redelivery may re-sample a page that changed meanwhile: the first sample stands.
        with contextlib.suppress(BlobConflict):
            deps.blobs.put(key, extracted.content_md.encode("utf-8"))
        return sample, deps.decider.decide(facts, exclude), key, "; ".join(errors) or None
    reason = ("no sample allowed by robots.txt" if not candidates else
              "no sample could be fetched (" + "; ".join(errors) + ")")
    # Without a sample the URL rules stand: include, and let each URL's fetch record what happens.
    return None, PageDecision("include", reason, 0.5, content_kind="unsampled"), None, None
