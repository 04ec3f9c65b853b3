"""Search's second look with the transformer (GLEANER_RERANK=minilm): the first pages, ordered again.

Real components: the embedded PostgreSQL with pgvector, the packaged static model and MiniLM (each
loaded once per test session), the paraphrase site of the retrieval tests on loopback. What the
second look buys is measured on real documentation (infra/bench/realdocs.py --rerank); here, what a
user of it sees: the same pages, their best ones ordered by the transformer, verbatim passages.
"""

from __future__ import annotations

import json

import pytest

from gleaner.cli.info import describe
from gleaner.demosite.testsite import TestSite
from gleaner.errors import ConfigError
from gleaner.provenance.slices import slice_text_bytes
from gleaner.retrieval import rerank, search
from gleaner.runtime.runner import crawl, new_request
from gleaner.settings.config import Settings
from tests.integration.paraphrase_site import QUESTIONS, recall, topic_pages

SITE = "topics.test"


@pytest.fixture
def topics(deps):
    """The paraphrase site crawled with the defaults (the static model embeds at ingest): (deps, site)."""
    if not deps.search_index.has_vectors():
        pytest.skip("this PostgreSQL has no pgvector: the second look orders what the full text found")
    with TestSite(topic_pages(), max_seconds=300) as site:
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
        yield deps, site


def test_the_second_look_is_a_setting_off_by_default_and_gleaner_info_says_when_it_is_on(deps, make_deps):
    assert Settings.from_env({}).rerank == "none" and deps.reranker is None
    assert Settings.from_env({"GLEANER_RERANK": "MiniLM"}).rerank == "minilm"
    with pytest.raises(ConfigError, match="GLEANER_RERANK must be 'none' or 'minilm'"):
        Settings.from_env({"GLEANER_RERANK": "cross-encoder"})
    assert "looked at again" not in describe(deps.settings, ())["search"]
    assert "looked at again by all-MiniLM-L6-v2" in describe(make_deps(rerank="minilm").settings, ())["search"]


def test_the_second_look_orders_the_first_pages_again_and_answers_with_verbatim_passages(topics, make_deps):
    deps, site = topics
    looking = make_deps(rerank="minilm")
    rerank.forget()
    plain = {q: search(deps, q, site_domain=SITE, limit=8)["results"] for q in QUESTIONS}
    looked = {q: search(looking, q, site_domain=SITE, limit=8)["results"] for q in QUESTIONS}
    reordered = 0
    for q in QUESTIONS:
        before, after = plain[q], looked[q]
        # The same first pages, perhaps in another order; every later page where it was.
        assert {h["url"] for h in after[:rerank.PAGES]} == {h["url"] for h in before[:rerank.PAGES]}
        assert [h["url"] for h in after[rerank.PAGES:]] == [h["url"] for h in before[rerank.PAGES:]]
        reordered += [h["url"] for h in after] != [h["url"] for h in before]
        scores = [h["score"] for h in after]
        assert scores == sorted(scores, reverse=True) and all(0 < s <= 1 for s in scores)
        assert [h["page_rank"] for h in after] == list(range(1, len(after) + 1))
        for hit in after:  # the passage the transformer chose is still a verbatim slice of the page's text
            body = looking.provenance.text_bytes(hit["text_hash"])
            piece = slice_text_bytes(hit["text_hash"], body, hit["start"], hit["end"], whole_characters=False)
            assert " ".join(piece.data.decode().split())[:60] == hit["preview"][:60]
    assert reordered, "the second look changed no answer's order"
    figures = {name: recall({q: [h["url"] for h in answers[q]] for q in QUESTIONS}, site.url)
               for name, answers in (("plain", plain), ("looked", looked))}
    print(f"\nparaphrase recall@1: {figures['plain']['recall@1']:.2f} plain, "
          f"{figures['looked']['recall@1']:.2f} with the second look")
    assert figures["looked"]["recall@3"] == 1.0
    assert figures["looked"]["recall@1"] >= figures["plain"]["recall@1"]


def test_a_passage_once_read_is_not_read_or_embedded_again(topics, make_deps, monkeypatch):
    _deps, _site = topics
    looking = make_deps(rerank="minilm")
    rerank.forget()
    question = next(iter(QUESTIONS))
    first = search(looking, question, site_domain=SITE, limit=5)
    kept = len(rerank._kept)
    assert kept >= rerank.PAGES  # at least a passage of each page looked at
    calls = []
    model = looking.reranker
    original = model.embed
    monkeypatch.setattr(model, "embed", lambda texts: calls.append(list(texts)) or original(texts))
    again = search(looking, question, site_domain=SITE, limit=5)
    assert again == first
    assert calls == [[question]]  # only the question is embedded the second time
    assert len(rerank._kept) == kept


def test_gleaner_search_rerank_takes_the_second_look_for_one_question(topics, make_deps, database_url, tmp_path):
    from click.testing import CliRunner

    from gleaner.cli import main

    deps, _site = topics
    looking = make_deps(rerank="minilm")
    question = next(q for q in QUESTIONS
                    if [h["url"] for h in search(looking, q, site_domain=SITE, limit=5)["results"]]
                    != [h["url"] for h in search(deps, q, site_domain=SITE, limit=5)["results"]])
    env = {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "cli-home")}

    def urls(*flags):
        result = CliRunner().invoke(main, ["search", question, "--site-domain", SITE, "--limit", "5", "--json",
                                           *flags], env=env)
        assert result.exit_code == 0, result.output
        return [h["url"] for h in json.loads(result.output)["results"]]

    looked = [h["url"] for h in search(looking, question, site_domain=SITE, limit=5)["results"]]
    plain = [h["url"] for h in search(deps, question, site_domain=SITE, limit=5)["results"]]
    assert urls("--rerank") == looked
    assert urls() == urls("--no-rerank") == plain
    env["GLEANER_RERANK"] = "minilm"  # the setting, and the flag over it
    assert urls() == looked and urls("--no-rerank") == plain


def test_searches_on_several_threads_at_once_answer_as_one_at_a_time(topics, make_deps):
    # A server answers on several threads, which share the kept passage vectors.
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    _deps, _site = topics
    looking = make_deps(rerank="minilm")
    rerank.forget()
    questions = list(QUESTIONS)[:8]
    alone = {q: search(looking, q, site_domain=SITE, limit=5)["results"] for q in questions}
    rerank.forget()
    jobs = [(contextvars.copy_context(), q) for q in questions * 2]  # each in the caller's tenant scope
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(
            lambda job: job[0].run(search, looking, job[1], site_domain=SITE, limit=5)["results"], jobs))
    assert together == [alone[q] for q in questions * 2]
