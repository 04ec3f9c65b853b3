"""A second look at the best pages by the transformer itself (``GLEANER_RERANK=minilm``; off by default).

The default model reads a passage as the mean of its word pieces' vectors (gleaner.retrieval.static);
all-MiniLM-L6-v2, the model that table is distilled from, reads word order and context at a few
hundred times the cost: far too slow to embed a crawl's chunks on a small machine, affordable on a
handful of passages a question. So the first ``PAGES`` pages of the fused ranking are looked at
again: each page by up to ``PASSAGES`` of its candidate chunks (the passage fusion chose, then the
page's others nearest by the default model), each read as the model reads a chunk (its section
heading, then its bytes). A page's score becomes its fused score plus ``WEIGHT`` times the best
cosine of its passages to the question under MiniLM, over ``1 + WEIGHT`` (0-1 again); the page then
answers with that passage. Pages after the first ``PAGES`` keep their order, scored on the same scale
with no cosine (so never above a page looked at again).

What it buys and costs is measured on the real documentation sets (infra/bench/realdocs.py
``--rerank``; docs/retrieval.md): the constants were chosen on the tuning sets from a plateau (5 or 6
pages, 4 passages, weight 0.5 to 1.5). Each passage costs MiniLM a forward pass of up to 256 word
pieces (tens of milliseconds of one core), so it stays off by default: a search's p95 target (100 ms)
does not hold with it on two cores. A chunk's bytes never change under its text hash and ordinal, so
its MiniLM vector is kept per process (up to ``KEPT`` of them): a second question over the same pages
costs only the pages it has not seen.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import replace
from typing import TYPE_CHECKING

import sqlalchemy as sa

from gleaner.retrieval.chunks import model_reading
from gleaner.retrieval.hybrid import TEXT_SLICE

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from gleaner.retrieval.embedder import Embedder
    from gleaner.retrieval.fusion import Candidate, RankedPage
    from gleaner.retrieval.hybrid import Pool

PAGES = 5
PASSAGES = 4
WEIGHT = 1.0
KEPT = 20_000  # passage vectors kept per process (384 floats each: about 30 MB at most)

# Each passage as the model reads a chunk: its heading, then its bytes (gleaner.retrieval.chunks).
_PASSAGE_TEXTS = sa.text(
    "SELECT c.text_hash, c.ordinal, COALESCE(c.heading, ''), "
    + TEXT_SLICE.format(start="c.chunk_start", end="c.chunk_end") +
    " FROM unnest(CAST(:h AS text[]), CAST(:o AS int[])) k(text_hash, ordinal)"
    " JOIN knowledge.text_chunks c ON c.text_hash = k.text_hash AND c.ordinal = k.ordinal"
    " JOIN knowledge.canonical_texts t ON t.text_hash = c.text_hash")

_kept: OrderedDict[tuple[str, str, int], list[float]] = OrderedDict()
_kept_lock = threading.Lock()  # a server's request threads share the kept vectors


def _passages(page: RankedPage, pool: Pool) -> list[Candidate]:
    """The page's passages to look at: fusion's choice first, then its others nearest by meaning."""
    others = sorted((c for c in pool.chunks.values() if c.text_hash == page.text_hash and c is not page.best),
                    key=lambda c: (-(c.meaning or 0.0), c.ordinal))
    return [page.best, *others][:PASSAGES]


def _vectors(conn: Connection, model: Embedder, keys: list[tuple[str, int]]) -> dict[tuple[str, int], list[float]]:
    """MiniLM's vector of each chunk key: kept ones from memory, the others read and embedded now."""
    out: dict[tuple[str, int], list[float]] = {}
    with _kept_lock:
        for key in keys:
            vector = _kept.get((model.model, *key))
            if vector is not None:
                _kept.move_to_end((model.model, *key))
                out[key] = vector
    missing = [k for k in keys if k not in out]
    if missing:
        rows = conn.execute(_PASSAGE_TEXTS, {"h": [k[0] for k in missing], "o": [k[1] for k in missing]}).all()
        read = {(str(r[0]), int(r[1])): model_reading(str(r[2]), str(r[3])) for r in rows}
        found = [k for k in missing if k in read]
        out.update(zip(found, model.embed([read[k] for k in found]), strict=True))
        with _kept_lock:
            for key in found:
                _kept[(model.model, *key)] = out[key]
            while len(_kept) > KEPT:
                _kept.popitem(last=False)
    return out


def rerank(conn: Connection, model: Embedder, query: str, ranked: list[RankedPage], pool: Pool) -> list[RankedPage]:
    """``ranked`` with its first ``PAGES`` pages ordered again by MiniLM's reading (module docstring)."""
    head = ranked[:PAGES]
    if len(head) < 2:
        return ranked
    looked = {p.key: _passages(p, pool) for p in head}
    vectors = _vectors(conn, model, sorted({(c.text_hash, c.ordinal) for cs in looked.values() for c in cs}))
    question = model.embed([query])[0]

    def cosine(c: Candidate) -> float:
        vector = vectors.get((c.text_hash, c.ordinal))
        return -1.0 if vector is None else sum(a * b for a, b in zip(vector, question, strict=True))

    again = []
    for page in head:
        best = max(looked[page.key], key=lambda c: (cosine(c), c is page.best, -c.start))
        again.append(replace(page, best=best, score=(page.score + WEIGHT * max(0.0, cosine(best))) / (1 + WEIGHT)))
    again.sort(key=lambda p: (-p.score, p.text_hash, p.key))
    return again + [replace(p, score=p.score / (1 + WEIGHT)) for p in ranked[PAGES:]]


def forget() -> None:
    """Drop the kept passage vectors (tests)."""
    with _kept_lock:
        _kept.clear()
