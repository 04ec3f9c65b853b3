"""The vector path ingest had before binary COPY, for a comparison in one run (infra/bench/retrieval.py):
each vector formatted as a text literal in Python, carried in the insert's JSON, parsed by pgvector.

Also the CPU of the PostgreSQL server's processes (what indexing adds there, not only in the crawl's
process): the postmaster's own and reaped children's from /proc, plus each live child's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from gleaner.retrieval import index as index_module
from gleaner.retrieval import prepare as prepare_module
from gleaner.retrieval.chunks import chunk_text, embedding_input
from gleaner.retrieval.prepare import NewText, Prepared, PreparedText

_TEXT_SQL = sa.text(
    "INSERT INTO knowledge.text_chunks (text_hash, ordinal, chunk_start, chunk_end, heading, tsv,"
    " fresh_embedding, embedding_model, embedding_dim)"
    " SELECT h, o, s, e, hd, setweight(knowledge.search_words(hd), 'A') || knowledge.search_words(t),"
    " CAST(v AS public.vector), :m, :d"
    " FROM json_to_recordset(CAST(:rows AS json)) AS c(h text, o int, s int, e int, hd text, t text, v text)"
    " ON CONFLICT (text_hash, ordinal) DO NOTHING"
)


def vector_literals(vectors: Sequence[Sequence[float]]) -> list[str]:
    import numpy as np

    micro = np.rint(np.asarray(vectors, dtype=np.float64) * 1e6).astype(np.int64).tolist()
    return ["[" + "e-6,".join(map(str, row)) + "e-6]" for row in micro]


def prepare_texts_as_text(texts: Sequence[NewText], embedder: Any) -> Prepared:
    rows: list[tuple[str, dict[str, object]]] = []
    inputs: list[str] = []
    for new in texts:
        body = new.text
        for c in chunk_text(body, json.loads(new.spans_json)):
            rows.append((new.text_hash, {"h": new.text_hash, "o": c.ordinal, "s": c.start, "e": c.end,
                                         "hd": c.heading, "t": body[c.start:c.end].decode("utf-8", "replace")}))
            if embedder is not None:
                inputs.append(embedding_input(body, c))
    if embedder is not None and rows:
        for (_h, row), literal in zip(rows, vector_literals(embedder.embed(inputs)), strict=True):
            row["v"] = literal
    parts: dict[str, list[str]] = {new.text_hash: [] for new in texts}
    for text_hash, row in rows:
        parts[text_hash].append(json.dumps(row, separators=(",", ":"), ensure_ascii=False))
    return Prepared({h: PreparedText(h, ",".join(p), len(p)) for h, p in parts.items()},
                    embedder.model if embedder is not None else None,
                    embedder.dimension if embedder is not None else None)


@contextmanager
def text_vectors() -> Iterator[None]:
    """Ingest (in-process) writes vectors as it did before binary COPY, while inside."""
    saved = prepare_module.prepare_texts, index_module._CHUNKS_EMBEDDED, index_module.copy_vectors
    prepare_module.prepare_texts = prepare_texts_as_text
    index_module._CHUNKS_EMBEDDED = _TEXT_SQL
    index_module.copy_vectors = lambda conn, rows: None
    try:
        yield
    finally:
        prepare_module.prepare_texts, index_module._CHUNKS_EMBEDDED, index_module.copy_vectors = saved


def _ticks(pid: int, children: bool) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # after the name: utime, stime, cutime, cstime are fields 14-17 of stat (11-14 here)
    return sum(int(x) for x in fields[11:15 if children else 13])


def postgres_cpu_seconds(pgdata: Path) -> float:
    """CPU seconds the server's processes used so far (those ended included, once the postmaster reaped them)."""
    postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    total = _ticks(postmaster, children=True)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(stat[1]) == postmaster:
                total += _ticks(int(entry.name), children=False)
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile
    return total / os.sysconf("SC_CLK_TCK")
