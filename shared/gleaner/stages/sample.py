"""Stage 2, sample: decide include / exclude / needs_review for every URL of a run.

The operator's word first (a review decision, then skip rules, re-applied to the
site's documents at the start of every sample, then include rules: pages forced in), then URL rules (exclude globs,
login/cart/search/tag/pagination/feed/asset patterns). Then the remaining URLs are grouped by path
section (first segment); one page per section is fetched and extracted as the
section's sample (stored at runs/{run}/samples/{page_id}.md), and the decider's
verdict on the sample stands for its section; an exclusion only once more of the
section's pages were read and agree (stages/sectionproof.py). On a recrawl the previous run's
sample of a section is asked first, with a conditional GET on the validators it
answered with: a 304 carries that run's verdict over (same decider, same exclude
globs) and hard-links its sample blob into this run's samples, so nothing is
extracted again. All decisions are written in one statement. Excludes are materialised as
documents.scrape_policy='skip'. Include pages are cut into batches of at most
100 (fewer for a host whose delay or Crawl-delay is long: stages/batching.py) and
enqueued as scrape tasks named run id + batch number. A sample read by the browser (render = auto |
always) keeps its rendering for scrape (render/kept.py), and the links its rendered DOM holds join
the run before the decisions are written (stages/foundlinks.py): pages of a section already sampled take
its verdict, a new section is sampled in turn.
"""

from __future__ import annotations

import logging
from collections import Counter, OrderedDict, deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import chain, islice
from typing import Any

from gleaner.app import Deps
from gleaner.decide.port import PageDecision, PageFacts, Verdict
from gleaner.errors import BlobConflict
from gleaner.extract.page import PDF, extract_body, extract_document
from gleaner.fetch.fetcher import Fetcher
from gleaner.fetch.types import FetchOutcome, FetchRequest, FetchResult
from gleaner.messages import CrawlMapped, ScrapeBatch, SnapshotsWritten
from gleaner.operator.lastmod import REASON as LASTMOD_REASON
from gleaner.operator.rules import forced_in
from gleaner.render.kept import kept_rendering
from gleaner.render.modes import RenderMode, mode_for, parse_render_mode
from gleaner.render.reader import render_rules
from gleaner.render.sampling import render_sample
from gleaner.stages.batching import batch_size_for
from gleaner.stages.foundlinks import add_rendered_links
from gleaner.stages.samplekeep import SampleAnswers, keep_answer, keep_rendered, store_sample, vouched_by_walk
from gleaner.stages.sectionproof import confirm_exclusion, section_verdict
from gleaner.stages.upkeep import finish_run
from gleaner.store.backends.blobs import sample_key
from gleaner.store.ledger.decisions import PreviousSample
from gleaner.store.ledger.fetchonce import PAGE_KINDS, replay_for
from gleaner.store.ledger.records import Decision, FetchRecord, RunPage, SamplePage
from gleaner.urls import section_of

log = logging.getLogger(__name__)


def handle(message: CrawlMapped, deps: Deps) -> list[ScrapeBatch]:
    meta = deps.metadata
    run_id = message.run_id
    status = meta.touch_run(run_id)
    if status in ("scraping", "finished", "partial"):
        _catch_up_ingest(deps, message)
        return _enqueue(deps, message, meta.batches_of(run_id))  # redelivery (or resume): task names dedupe
    if status not in ("mapped", "sampling"):
        log.warning("run %s is %s; nothing to sample", run_id, status)
        return []
    meta.set_run_status(run_id, "sampling", only_from=("mapped",))
    options = deps.run_options(run_id)
    exclude = tuple(str(g) for g in options.get("exclude", ()))
    render = parse_render_mode(options.get("render")) or RenderMode.NEVER
    rules = render_rules(deps, message.site_domain)  # rules add --render: a section's mode may be its own
    meta.apply_site_rules(message.site_domain)  # a rule added since map holds for this run too
    site_rules = meta.site_rules(message.site_domain)
    # A large run holds one record a URL here: slim ones, and no decision object a page for a section's
    # members (they share their section's, made into rows only as they are written).
    pages = meta.sample_pages(run_id)
    decisions: dict[str, Decision] = {}  # pages decided one by one: the operator's, URL rules', the samples
    sections: OrderedDict[str, list[SamplePage]] = OrderedDict()
    pending: deque[str] = deque()  # sections to sample, in order

    def classify(page: SamplePage) -> None:
        if page.operator_decision is not None:  # `gleaner review decide`: outranks rules and the decider
            decisions[page.document_id] = Decision(page.document_id, page.operator_decision, "operator",
                                                   f"operator review: {page.operator_decision}", 1.0,
                                                   {"content_kind": "reviewed", "evidence": []})
            return
        if page.skipped_by_operator:
            decisions[page.document_id] = Decision(page.document_id, Verdict.EXCLUDE, "operator",
                                                   f"scrape_policy=skip ({page.skip_reason or 'operator'})", 1.0,
                                                   {"content_kind": "skipped", "evidence": []})
            return
        forced = forced_in(page.path, site_rules, exclude)
        if forced is not None:  # `rules add --include`: over every automatic verdict, the page is scraped
            decisions[page.document_id] = Decision(page.document_id, Verdict.INCLUDE, "operator",
                                                   forced.describe(), 1.0, {"content_kind": "forced",
                                                                            "evidence": [forced.glob]})
            return
        verdict = deps.decider.decide(PageFacts(url=page.canonical_url, path=page.path), exclude)
        if verdict.decision == Verdict.EXCLUDE:
            decisions[page.document_id] = _decision(page.document_id, verdict)
            return
        section = section_of(page.path)
        if section not in sections:
            pending.append(section)
        sections.setdefault(section, []).append(page)

    for page in pages:
        classify(page)
    reusable = _reusable_samples(deps, message, exclude) if sections else {}
    answers = SampleAnswers(deps, message)  # what the samples fetched, kept for scrape and a redone sample
    by_section: dict[str, Decision] = {}  # the decision of a section's other members, document_id unset
    def join_rendered(outcome: SampleOutcome) -> None:
        if outcome.sample is not None and outcome.rendered is not None:
            # Links only the rendered sample shows join the run: decided with the rest below.
            found = set(add_rendered_links(deps, run_id, message.site_domain, [(outcome.sample, *outcome.rendered)]))
            added = [p for p in meta.sample_pages(run_id) if p.canonical_url in found] if found else []
            pages.extend(added)
            for page in added:
                classify(page)

    with deps.new_fetcher(run_id=run_id) as fetcher:
        while pending:
            section = pending.popleft()
            members = sections[section]
            mode = mode_for(members[0].path, render, rules)
            outcome = _sample_section(deps, fetcher, message, members, exclude, reusable.get(section), answers, mode)
            join_rendered(outcome)
            outcomes = [outcome]
            if outcome.sample is not None and outcome.verdict.decision == Verdict.EXCLUDE:
                # One page excluded is evidence about that page only: before its verdict stands for the
                # section, more of the section's pages are read (stages/sectionproof.py).
                for more in confirm_exclusion(members, outcome.sample.document_id,
                                              lambda rest, mode=mode: _sample_section(  # type: ignore[misc]
                                                  deps, fetcher, message, rest, exclude, None, answers, mode)):
                    join_rendered(more)
                    outcomes.append(more)
            for each in outcomes:
                if each.sample is not None:
                    decisions[each.sample.document_id] = _decision(each.sample.document_id, each.verdict, each.uri,
                                                                   each.error, each.seen, render=each.render)
            sample, verdict = outcome.sample, outcome.verdict
            if sample is None:
                by_section[section] = _decision("", verdict, outcome.uri, outcome.error)
            else:
                by_section[section] = _decision("", section_verdict(section, [
                    (o.sample.path, o.verdict) for o in outcomes if o.sample is not None]), render=outcome.render)
    sections.clear()

    def decision_of(page: SamplePage) -> Decision:
        return decisions.get(page.document_id) or by_section[section_of(page.path)]

    included = [p for p in pages if decision_of(p).decision == Verdict.INCLUDE]
    include = [p.document_id for p in included]
    unchanged: set[str] = set()
    if options.get("honour_lastmod"):
        # The sitemap says these did not change since their last fetch: settled without a request.
        unchanged = meta.unchanged_since_last_fetch(run_id, include)
        include = [d for d in include if d not in unchanged]
    settings = deps.run_settings(run_id)  # a run's own --delay paces its batches
    # Sized to the host's pace (delay, Crawl-delay) so a task settles its batch before its soft deadline.
    size = batch_size_for((p.fetch_url for p in included), deps.host_table, default_delay=settings.host_delay,
                          default_concurrency=settings.host_concurrency,
                          soft_deadline=settings.scrape_soft_deadline, cap=settings.scrape_batch_size)
    batches = [include[i:i + size] for i in range(0, len(include), size)]
    # Each page's batch and the sample's kept answer go with its decision: one write of its ledger row.
    meta.record_decisions(run_id, (d if d.document_id else replace(d, document_id=p.document_id)
                                   for p in pages for d in (decision_of(p),)),
                          {doc: i // size for i, doc in enumerate(include)}, answers.by_document)
    meta.record_not_modified(run_id, [FetchRecord(d, "not-modified", LASTMOD_REASON, None, 0, None, None, None)
                                      for d in sorted(unchanged)])
    if not meta.start_scrape(run_id, batches):
        batches = meta.batches_of(run_id)
    scheduled = _enqueue(deps, message, batches)  # first: the site waits for nothing else
    _catch_up_ingest(deps, message)
    if not batches:
        finish_run(deps, run_id)  # fetched bodies go if that settled the run
    return scheduled


def _catch_up_ingest(deps: Deps, message: CrawlMapped) -> None:
    """Send ingest the site's current snapshots that have no canonical text yet.

    A crash between snapshot and ingest leaves such snapshots, and a later run never versions an
    unchanged page again, so nothing else would ingest them: every run (and every resume) completes
    what an earlier one left. Ingest is idempotent, so a snapshot sent twice costs a lookup.
    """
    missing = deps.metadata.snapshots_without_text(message.site_domain)
    size = deps.settings.scrape_batch_size
    for i in range(0, len(missing), size):
        deps.bus.publish(SnapshotsWritten(run_id=message.run_id, site_domain=message.site_domain,
                                          snapshot_ids=tuple(missing[i:i + size])), ordering_key=message.site_domain)
    if missing:
        log.info("run %s: ingesting %d snapshots an earlier run left without text", message.run_id, len(missing))


def _enqueue(deps: Deps, message: CrawlMapped, batches: list[list[str]]) -> list[ScrapeBatch]:
    tasks = [ScrapeBatch(run_id=message.run_id, site_domain=message.site_domain, batch_no=no,
                         document_ids=tuple(ids)) for no, ids in enumerate(batches)]
    for task in tasks:
        deps.bus.enqueue(task)
    return tasks


def _decision(document_id: str, verdict: PageDecision, uri: str | None = None, error: str | None = None,
              sample: dict[str, Any] | None = None, *, render: str | None = None) -> Decision:
    # The decider's own metadata (a language model's name, prompt version, tokens, cost) first.
    metadata: dict[str, Any] = {**verdict.metadata, "content_kind": verdict.content_kind,
                                "evidence": list(verdict.evidence)}
    if sample:
        metadata["sample"] = sample
    if render:
        metadata["render"] = render  # the section's rendering verdict (store/ledger/rendering.py reads it)
    return Decision(document_id, verdict.decision, verdict.source, verdict.reason, verdict.confidence,
                    metadata, uri, error)


def _decider_name(deps: Deps) -> str:
    kind = type(deps.decider)
    return f"{kind.__module__}.{kind.__qualname__}"


def _reusable_samples(deps: Deps, message: CrawlMapped, exclude: tuple[str, ...]) -> dict[str, PreviousSample]:
    """Section -> the previous run's sample, where its verdict may stand again if the page is unchanged:
    decided by the same decider under the same exclude globs, with validators to ask about it."""
    decider = _decider_name(deps)
    samples = deps.metadata.previous_samples(message.site_domain, message.run_id)
    # A section read through several pages (an exclusion checked on more of them) is sampled afresh:
    # no one page's 304 vouches for what they showed together.
    per_section = Counter(section_of(prev.path) for prev in samples)
    return {section_of(prev.path): prev for prev in samples
            if prev.exclude == exclude and prev.metadata.get("sample", {}).get("decider") == decider
            and (prev.etag or prev.last_modified) and per_section[section_of(prev.path)] == 1}


# Metadata keys this stage writes itself; the rest is the decider's and carries over with its verdict.
_SAMPLE_KEYS = frozenset({"content_kind", "evidence", "sample", "render"})


def _carry_over(deps: Deps, message: CrawlMapped, sample: RunPage, prev: PreviousSample,
                result: FetchResult) -> SampleOutcome | None:
    """The previous verdict for a sample that answered 304, its blob linked into this run; None if that blob
    is gone (run artefacts expire), so the section is sampled afresh."""
    key = sample_key(message.site_domain, message.run_id, sample.url_hash)
    try:
        deps.blobs.copy(prev.sample_uri, key)
    except KeyError:
        return None
    except BlobConflict:
        pass  # a redelivery already stored this run's sample: the first one stands
    meta = prev.metadata
    verdict = PageDecision(prev.decision, prev.reason, prev.confidence, prev.source,
                           str(meta.get("content_kind", "page")), tuple(meta.get("evidence", ())),
                           {k: v for k, v in meta.items() if k not in _SAMPLE_KEYS})
    seen = {**meta["sample"], "etag": result.etag or prev.etag,
            "last_modified": result.last_modified or prev.last_modified,
            "decided_in_run": meta["sample"].get("decided_in_run") or prev.run_id}
    return SampleOutcome(sample, verdict, key, seen=seen, render=meta.get("render"))


# A section whose first pages fail to fetch is not judged on a failure: try a few before giving up.
SAMPLE_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class SampleOutcome:
    """What sampling a section found: the page sampled (None: no sample), the verdict for the section,
    the stored sample's key, what went wrong on the way, and the validators seen (for reuse later)."""

    sample: RunPage | None
    verdict: PageDecision
    uri: str | None = None
    error: str | None = None
    seen: dict[str, Any] | None = None
    render: str | None = None  # "browser" when the section is read rendered (render/sampling.py)
    rendered: tuple[bytes, str] | None = None  # the sample's rendered DOM and its URL (stages/foundlinks.py)


def _candidates(deps: Deps, fetcher: Fetcher, run_id: str, members: list[SamplePage],
                first: SamplePage | None) -> Iterator[RunPage]:
    """Robots-allowed members, ``first`` first, each read whole; lazily, since a section may hold thousands
    of pages."""
    ordered = chain((first,), (p for p in members if p is not first)) if first is not None else iter(members)
    for page in ordered:
        if fetcher.robots(page.fetch_url).allows(page.fetch_url):
            yield from deps.metadata.run_pages(run_id, [page.document_id])


def _fetch_sample(deps: Deps, fetcher: Fetcher, message: CrawlMapped, sample: RunPage, prev: PreviousSample | None,
                  answers: SampleAnswers) -> tuple[FetchResult, bool]:
    """The sample's answer, and whether a 304 in it vouches for ``prev``'s verdict.

    A page map's walk already asked for is not asked again: its kept answer is used (a 304 there
    answered the document's own validators, which vouch for ``prev`` only if they are prev's). A page
    asked now is asked with ``prev``'s validators and its answer kept for scrape, a 304 only where those
    are the document's own (then it means to scrape what scrape's own conditional GET would).
    """
    same = prev is not None and (prev.etag, prev.last_modified) == (sample.etag, sample.last_modified)
    replay = replay_for(deps.blobs, sample.prefetched, sample.fetch_url, None, sample.current_hash is not None)
    if replay is not None:
        return replay, same
    if prev is not None and vouched_by_walk(sample.prefetched, prev):
        # A page with no snapshot (one this sample excluded before): the walk's 304 answered the validators
        # it was last read with, and those are prev's, so prev's verdict stands without asking again.
        return FetchResult(sample.fetch_url, FetchOutcome.NOT_MODIFIED, "304 not modified (map)", status=304,
                           etag=prev.etag, last_modified=prev.last_modified), True
    earlier = answers.earlier(sample)  # this sample's answer, got before a crash (stages/answerkeep.py)
    if earlier is not None:
        return earlier, prev is not None
    result = fetcher.fetch(FetchRequest(sample.fetch_url, accept=PAGE_KINDS,
                                        etag=prev.etag if prev else None,
                                        last_modified=prev.last_modified if prev else None))
    if result.outcome is not FetchOutcome.NOT_MODIFIED or (same and sample.current_hash is not None):
        keep_answer(deps, message, sample, result, answers)
    return result, prev is not None


def _sample_section(deps: Deps, fetcher: Fetcher, message: CrawlMapped, members: list[SamplePage],
                    exclude: tuple[str, ...], prev: PreviousSample | None,
                    answers: SampleAnswers, render: RenderMode = RenderMode.NEVER) -> SampleOutcome:
    """Fetch the first robots-allowed, fetchable page of a section and decide on it (or reuse ``prev``)."""
    again = next((p for p in members if p.document_id == prev.document_id), None) if prev else None
    errors: list[str] = []
    allowed = refusals = 0
    refused: tuple[RunPage, FetchResult] | None = None
    for sample in islice(_candidates(deps, fetcher, message.run_id, members, again), SAMPLE_ATTEMPTS):
        allowed += 1
        asked_again = again is not None and sample.document_id == again.document_id
        result, vouches = _fetch_sample(deps, fetcher, message, sample, prev if asked_again else None, answers)
        if result.outcome is FetchOutcome.NOT_MODIFIED:
            carried = _carry_over(deps, message, sample, prev, result) if prev is not None and vouches else None
            if carried is not None:
                return carried
            # The verdict cannot carry over (its sample expired, or the 304 vouched for other validators):
            # the one case where a page is asked twice in a run, for a body to decide on.
            result = fetcher.fetch(FetchRequest(sample.fetch_url, accept=PAGE_KINDS))
            keep_answer(deps, message, sample, result, answers)
        if result.outcome is FetchOutcome.EXHAUSTED:
            # The run's budget ran out: that says nothing about the section. Include its pages so the
            # scrape stage records each one exhausted and the run ends partial, instead of dropping them.
            verdict = PageDecision(Verdict.INCLUDE,
                                   f"sample not fetched ({result.reason}); the fetcher decides per URL",
                                   0.5, content_kind="unsampled")
            return SampleOutcome(None, verdict, error=f"{result.outcome}: {result.reason}")
        if result.outcome is FetchOutcome.FETCHED and result.content_type == PDF:
            document = deps.extract_pool.call(extract_document, result.body or b"").result()
            if document.refused is not None:
                result = replace(result, outcome=FetchOutcome.REFUSED_CONTENT, reason=document.refused)
        if result.outcome is FetchOutcome.REFUSED_CONTENT:
            # One member that is no page (an image, an unreadable document) does not judge its section:
            # another member is tried; only a section of nothing but such members is excluded.
            refused, refusals = (sample, result), refusals + 1
            errors.append(f"{sample.path}: {result.outcome} {result.reason}".strip())
            continue
        if result.outcome is not FetchOutcome.FETCHED:
            errors.append(f"{sample.path}: {result.outcome} {result.reason}".strip())
            continue
        rendered = None
        if result.content_type == PDF:
            content_md, main_text_chars, title = document.content.decode("utf-8"), len(document.content), document.title
        else:
            # Where extraction runs: the extractors are never imported here (nor warmed up by their first page).
            extracted = deps.extract_pool.call(extract_body, result.body or b"", result.charset,
                                               result.final_url or sample.fetch_url).result()
            content_md, main_text_chars, title = extracted.content_md, extracted.main_text_chars, extracted.title
            rendered = render_sample(deps, fetcher, render, result, main_text_chars, run_id=message.run_id,
                                     kept=kept_rendering(deps.blobs, sample.prefetched))
            if rendered is not None:  # the browser read clearly more: the section is read rendered
                read = rendered.extracted
                content_md, main_text_chars, title = read.content_md, read.main_text_chars, read.title
                keep_rendered(deps, message, sample, rendered, answers)
        facts = PageFacts(url=sample.canonical_url, path=sample.path, sampled=True,
                          content_type=result.content_type, fetch_outcome=str(result.outcome),
                          main_text_chars=main_text_chars, title=title, sample_markdown=content_md,
                          run_id=message.run_id)
        stored = store_sample(deps, message, sample, content_md, errors)
        # What a later run needs to reuse this verdict: the validators the page answered with, the decider.
        seen = {"etag": result.etag, "last_modified": result.last_modified, "decider": _decider_name(deps),
                "decided_in_run": message.run_id}
        read_by = str(rendered.verdict) if rendered is not None else None
        return SampleOutcome(sample, deps.decider.decide(facts, exclude), stored, "; ".join(errors) or None, seen,
                             read_by, (rendered.html, result.final_url or sample.fetch_url) if rendered else None)
    if refused is not None and refusals == allowed:
        sample, result = refused
        facts = PageFacts(url=sample.canonical_url, path=sample.path, sampled=True,
                          content_type=result.content_type, fetch_outcome=str(result.outcome))
        return SampleOutcome(sample, deps.decider.decide(facts, exclude), error="; ".join(errors))
    reason = ("no sample allowed by robots.txt" if not allowed else
              "no sample could be fetched (" + "; ".join(errors) + ")")
    # Without a sample the URL rules stand: include, and let each URL's fetch record what happens.
    return SampleOutcome(None, PageDecision(Verdict.INCLUDE, reason, 0.5, content_kind="unsampled"))
