"""Rank fusion of a search's word and meaning rankings (gleaner.retrieval.fusion): pure, no database."""

from __future__ import annotations

from gleaner.retrieval.fusion import Candidate, fuse

# One chunk a page: (its BM25, its cosine to the question, the share of the question's word weight it holds).
Scores = dict[str, tuple[float | None, float | None, float]]
STRAY: Scores = {"plastics": (2.8, 0.30, 0.10), "solar": (1.7, 0.40, 0.14), "tides": (1.6, 0.20, 0.14)}
ANSWER: Scores = {"photosynthesis": (None, 0.52, 0.0)}


def _rank(pages: Scores, dense: bool = True) -> list[str]:
    chunks = [Candidate(text_hash=p, ordinal=0, start=0, end=10, words=w, meaning=m if dense else None)
              for p, (w, m, _c) in pages.items()]
    page_words = {p: w for p, (w, _m, _c) in pages.items() if w}
    coverage = {p: c for p, (_w, _m, c) in pages.items()}
    return [r.key for r in fuse({p: p for p in pages}, chunks, page_words, dense=dense, coverage=coverage)]


def test_pages_sharing_a_stray_word_with_the_question_do_not_push_its_answer_out_of_the_top_three():
    assert _rank({**STRAY, **ANSWER})[0] == "photosynthesis"


def test_a_page_with_a_stray_word_and_nothing_close_in_meaning_still_answers_last():
    pages = {**STRAY, **ANSWER, "chess": (2.9, None, 0.05)}  # not among the nearest by meaning
    chunks = [Candidate(text_hash=p, ordinal=0, start=0, end=10, words=w, meaning=m) for p, (w, m, _c) in pages.items()]
    ranked = fuse({p: p for p in pages}, chunks, {p: w for p, (w, _m, _c) in pages.items() if w}, dense=True,
                  coverage={p: c for p, (_w, _m, c) in pages.items()})
    assert [r.key for r in ranked][-1] == "chess" and 0 < ranked[-1].score < min(r.score for r in ranked[:-1])


def test_a_page_holding_much_of_the_question_s_words_still_ranks_by_them():
    pages = {**STRAY, **ANSWER, "leaves": (3.5, 0.45, 0.60)}
    assert _rank(pages)[0] == "leaves"


def test_without_vectors_every_page_holding_a_word_of_the_question_is_ranked_by_its_words():
    assert _rank({**STRAY, **ANSWER}, dense=False)[:3] == ["plastics", "solar", "tides"]


def test_a_long_page_s_best_chunk_must_be_closer_than_a_short_page_s_to_rank_above_it():
    # A changelog of 900 kB holds some chunk a little closer to the question than the 3 kB page that
    # answers it, by the chance of its many chunks; neither holds the question's words.
    pages: Scores = {"changelog": (None, 0.47, 0.0), "answer": (None, 0.44, 0.0)}
    chunks = [Candidate(text_hash=p, ordinal=0, start=0, end=10, meaning=m) for p, (_w, m, _c) in pages.items()]
    lengths = {"changelog": 900_000, "answer": 3_000}

    def ranked(lengths: dict[str, int] | None) -> list[str]:
        return [r.key for r in fuse({p: p for p in pages}, chunks, {}, dense=True, coverage={}, lengths=lengths)]

    assert ranked(None) == ["changelog", "answer"]  # no lengths known (as before): the closer chunk wins
    assert ranked(lengths) == ["answer", "changelog"]
    # Pages of one length rank by their cosine alone.
    assert ranked({"changelog": 3_000, "answer": 3_000}) == ["changelog", "answer"]


def test_pages_that_tie_rank_by_their_text_not_by_their_document_ids():
    # Two crawls of the same pages give their documents other ids: a tie broken by id ranked the same
    # pages in another order each time. By text hash, the same content ranks the same way every time.
    texts = {"a" * 64: (2.0, 0.5, 0.5), "b" * 64: (2.0, 0.5, 0.5), "c" * 64: (1.0, 0.4, 0.5)}
    chunks = [Candidate(text_hash=t, ordinal=0, start=0, end=10, words=w, meaning=m) for t, (w, m, _c) in texts.items()]
    orders = []
    for ids in (("id-2", "id-1", "id-3"), ("id-1", "id-2", "id-3")):
        pages = dict(zip(ids, texts, strict=True))
        ranked = fuse(pages, chunks, {t: w for t, (w, _m, _c) in texts.items()}, dense=True,
                      coverage={t: c for t, (_w, _m, c) in texts.items()})
        orders.append([r.text_hash[0] for r in ranked])
    assert orders == [["a", "b", "c"], ["a", "b", "c"]]
