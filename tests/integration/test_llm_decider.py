"""The language-model page decider against a real model behind llama.cpp's real OpenAI-compatible server.

Nothing here stubs the provider's HTTP exchange: every answer comes from SmolLM2-135M on loopback
(tests/llm_server.py). That model is too small to judge pages well, so these tests check the protocol
and the plumbing (schema, cache, budget, fallbacks, review), never whether a verdict is right; the
quality benchmark (infra/bench/llm_decider.py) measures that with a stronger model.
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager

import httpx

from gleaner.decide.language import LanguageModel
from gleaner.decide.openai_compat import OpenAICompatible
from gleaner.decide.port import PageFacts, Verdict
from gleaner.decide.prompts import CONTENT_KINDS, PROMPT_VERSION
from gleaner.demosite.testsite import Page, TestSite
from gleaner.runtime.runner import crawl, new_request
from gleaner.serving.serve import WebhookServer
from gleaner.store.ledger.llmanswers import RunBudget, model_usage

from ..llm_server import ALIAS, SMOLLM2_SHA256, closed_port_url, llm_server, smollm2_sha256  # noqa: F401
from .db_helpers import rows

SITE = "demo.test"
DOCS = ("# Installing\n\nDownload the archive, unpack it and run `./configure && make install`. The build needs "
        "a C compiler and about 200 MB of disk space. On Debian, install build-essential first.\n\n"
        "## Upgrading\n\nStop the service, install the new version over the old one and start it again; "
        "the configuration file is kept.")


def llm_deps(make_deps, base_url, **overrides):
    # A generous timeout: on a busy two-core machine one grammar-bound answer can take a minute or more.
    overrides.setdefault("llm_timeout", 600.0)
    return make_deps(llm_provider="openai", llm_base_url=base_url, llm_model=ALIAS, **overrides)


def _page(title: str, text: str, links: str = "") -> Page:
    return Page(f"<!doctype html><html><head><title>{title}</title></head><body><nav>{links}</nav><main>"
                f"<article><h1>{title}</h1><p>{text}</p><p>{text}</p></article></main></body></html>")


@contextmanager
def small_site():
    """Three sections (/docs, /blog, /legal) of two pages each and a home page: four questions a crawl."""
    links = "".join(f'<a href="/{s}/{n}.html">{s} {n}</a> ' for s in ("docs", "blog", "legal") for n in ("a", "b"))
    prose = ("Stop the service, install the new version over the old one and start it again; the configuration "
             "file is kept, and the database is migrated on the first start, which takes a minute on a large one.")
    pages = {"/": _page("Home", "Welcome. " + prose, links)}
    for section, title, text in (("docs", "Upgrading", prose), ("blog", "Release notes", prose),
                                 ("legal", "Privacy policy", "We store cookies. " + prose)):
        for n in ("a", "b"):
            pages[f"/{section}/{n}.html"] = _page(f"{title} {n}", text, links)
    with TestSite(pages, max_seconds=1800) as site:
        yield site


def sample_decisions(deps, run_id):
    """path -> (decision, source, reason, confidence, metadata, sample_uri) of the run's section samples."""
    return {r[0]: r[1:] for r in rows(
        deps, "SELECT d.path, c.decision::text, c.decision_source::text, c.decision_reason, c.decision_confidence,"
              " c.decision_metadata, c.sample_uri FROM knowledge.crawl_page_decisions c"
              " JOIN knowledge.documents d ON d.id = c.document_id"
              " WHERE c.run_id = :r AND c.sample_uri IS NOT NULL", r=run_id)}


def usage(deps, run_id):
    return RunBudget(deps.engine, 0, 0).usage(run_id)


def test_the_packaged_model_is_the_one_docs_llm_md_names(smollm2_sha256):  # noqa: F811
    assert smollm2_sha256 == SMOLLM2_SHA256


def test_a_real_model_classifies_a_page_by_the_schema_and_reports_its_tokens(llm_server):  # noqa: F811
    provider = OpenAICompatible(llm_server, ALIAS, timeout=600.0)
    answer = LanguageModel(provider).classify_page("http://docs.test/install", "Installing", DOCS)
    assert answer.decision in ("include", "exclude") and answer.content_kind in CONTENT_KINDS
    assert 0.0 <= answer.confidence <= 1.0 and isinstance(answer.reason, str)
    assert answer.usage.prompt_tokens > 100 and answer.usage.completion_tokens > 0
    # llama.cpp's server refuses OpenAI's json_schema dialect: the adapter found its own and keeps to it.
    assert provider.json_mode == "json_object"


def test_a_real_model_judges_a_pair_of_passages_by_the_schema(llm_server):  # noqa: F811
    model = LanguageModel(OpenAICompatible(llm_server, ALIAS, timeout=600.0, json_mode="json_object"))
    judged = model.judge_pair("The ferry leaves at 9:00 every day.", "The ferry leaves at 10:30 on weekdays.")
    assert judged.relation in ("contradiction", "complement", "duplicate", "unrelated")
    assert judged.severity in ("none", "low", "medium", "high")
    assert judged.usage.completion_tokens > 0


def test_a_crawl_records_each_sampled_verdict_with_its_model_prompt_version_tokens_and_sample(
        make_deps, llm_server):  # noqa: F811
    deps = llm_deps(make_deps, llm_server)
    with small_site() as site:
        summary = crawl(deps, new_request(site.url + "/", site_domain=SITE))
    assert summary["status"] == "finished"
    decided = sample_decisions(deps, summary["run_id"])
    by_model = {p: d for p, d in decided.items() if d[1] == "llm"}
    # A sample per section (/, /docs, /blog, /legal), and more pages of a section whose first sample was
    # excluded before that verdict stands for it (gleaner.stages.sectionproof).
    assert len(by_model) >= 4
    for _path, (decision, _source, reason, confidence, meta, uri) in by_model.items():
        assert decision in ("include", "exclude", "needs_review") and reason and 0 <= confidence <= 1
        assert meta["model"] == ALIAS and meta["prompt_version"] == PROMPT_VERSION
        assert meta["content_kind"] in CONTENT_KINDS and meta["tokens"] > 0 and meta["cost"] == 0.0
        assert deps.blobs.get(uri)  # the sample the model read, at sample_uri
    assert usage(deps, summary["run_id"]).calls == len(by_model)
    excluded = rows(deps, "SELECT d.scrape_policy::text FROM knowledge.crawl_page_decisions c JOIN"
                          " knowledge.documents d ON d.id = c.document_id WHERE c.run_id = :r"
                          " AND c.decision = 'exclude' AND c.decision_source = 'llm'", r=summary["run_id"])
    assert all(r[0] == "skip" for r in excluded)  # the model's exclude is materialised on the node


def test_an_unchanged_recrawl_asks_the_model_nothing(make_deps, llm_server):  # noqa: F811
    deps = llm_deps(make_deps, llm_server, webhook_secret="operator-" + "x" * 32)  # the run page is served
    with small_site() as site:
        first = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        second = crawl(deps, new_request(site.url + "/", site_domain=SITE))
    asked = [d for d in sample_decisions(deps, first["run_id"]).values() if d[1] == "llm"]
    assert usage(deps, first["run_id"]).calls == len(asked) >= 4
    assert usage(deps, second["run_id"]).calls == 0
    again = sample_decisions(deps, second["run_id"])
    assert {p: d[:2] for p, d in again.items()} == {p: d[:2] for p, d in
                                                    sample_decisions(deps, first["run_id"]).items()}
    # What the model did is on the run: the first run's pages asked, the recrawl's all from the cache.
    (used,) = model_usage(deps.engine, first["run_id"])["models"]
    assert (used["model"], used["samples"], used["cached"]) == (ALIAS, len(asked), 0) and used["tokens"] > 0
    (again_used,) = model_usage(deps.engine, second["run_id"])["models"]
    assert (again_used["samples"], again_used["cached"], again_used["tokens"]) == (len(asked), len(asked), 0)
    with WebhookServer(deps, port=0) as server:
        page = httpx.get(f"{server.url}/ui/runs/{second['run_id']}", timeout=30)
    assert page.status_code == 200
    shown = f"{ALIAS}</strong> read {len(asked)} section samples: {len(asked)} from its cache or an earlier run"
    assert shown + "; 0 tokens" in page.text


def test_a_sample_asked_before_is_answered_from_the_cache_whatever_the_run(make_deps, llm_server):  # noqa: F811
    deps = llm_deps(make_deps, llm_server)
    facts = dict(url="http://docs.test/install", path="/install", sampled=True, fetch_outcome="fetched",
                 content_type="text/html", main_text_chars=len(DOCS), title="Installing", sample_markdown=DOCS)
    first_run, second_run = str(uuid.uuid4()), str(uuid.uuid4())
    first = deps.decider.decide(PageFacts(**facts, run_id=first_run))
    second = deps.decider.decide(PageFacts(**facts, run_id=second_run))
    assert first.source == second.source == "llm" and first.decision == second.decision
    assert first.metadata["cached"] is False and second.metadata["cached"] is True
    assert (usage(deps, first_run).calls, usage(deps, second_run).calls) == (1, 0)
    # Another prompt version is another question: it is asked again.
    changed = deps.decider.decide(PageFacts(**{**facts, "title": "Installing (2nd edition)"}, run_id=second_run))
    assert changed.metadata["cached"] is False and usage(deps, second_run).calls == 1


def test_a_spent_budget_leaves_the_other_sections_to_the_rules_with_the_reason(make_deps, llm_server):  # noqa: F811
    deps = llm_deps(make_deps, llm_server, llm_run_max_calls=1)
    with small_site() as site:
        summary = crawl(deps, new_request(site.url + "/", site_domain=SITE))
    assert summary["status"] == "finished"
    decided = sample_decisions(deps, summary["run_id"]).values()
    assert [d[1] for d in decided].count("llm") == 1
    by_rules = [d for d in decided if d[1] == "rule"]
    assert len(by_rules) >= 2
    assert all("budget is spent" in d[2] and d[4]["llm_fallback"] for d in by_rules)
    spent = usage(deps, summary["run_id"])
    assert spent.calls == 1 and spent.refused == len(by_rules)
    shown = model_usage(deps.engine, summary["run_id"])
    assert shown["refused"] == len(by_rules) and shown["models"][0]["fell_back"] == len(by_rules)
    assert "budget is spent" in shown["models"][0]["fallback_reason"]


def test_a_provider_that_is_down_leaves_every_verdict_to_the_rules_and_the_run_finishes(make_deps):
    deps = llm_deps(make_deps, closed_port_url(), llm_timeout=5.0)
    with small_site() as site:
        summary = crawl(deps, new_request(site.url + "/", site_domain=SITE))
    assert summary["status"] == "finished" and summary["fetched"] > 0
    decided = sample_decisions(deps, summary["run_id"]).values()
    assert decided and all(d[1] == "rule" and "language model failed" in d[2] for d in decided)


def test_a_model_answer_below_the_confidence_floor_goes_to_the_review_queue(make_deps, llm_server):  # noqa: F811
    deps = llm_deps(make_deps, llm_server, llm_min_confidence=1.01)  # no answer is ever sure enough
    with small_site() as site:
        summary = crawl(deps, new_request(site.url + "/", site_domain=SITE))
    decided = {p: d for p, d in sample_decisions(deps, summary["run_id"]).items() if d[1] == "llm"}
    assert decided and Verdict.INCLUDE not in {d[0] for d in decided.values()}
    review = {item.path for item in deps.metadata.review_items(SITE)}
    kept_back = {p for p, d in decided.items() if d[0] == "needs_review"}
    assert kept_back <= review
    assert all("low confidence" in d[2] or "excluded a page" in d[2] for p, d in decided.items() if p in kept_back)

