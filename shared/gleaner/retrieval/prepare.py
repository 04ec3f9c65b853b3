"""A new text's chunk rows, ready to insert: chunked, embedded, each vector in pgvector's binary form.

:func:`prepare_texts` is the pure core: the same rows whichever process runs it. Where it runs is a
port (:class:`ChunkPreparer`) with two implementations:

- :class:`InProcessPreparer`: in the caller's process (the Cloud Functions' ingest, tests, a process
  without running extraction processes);
- :class:`PooledPreparer`: in a process beside the extraction workers (``ExtractPool.call_aside``:
  ingest waits for it on a bus thread, so it never queues behind scrape's pages), while they run (a
  crawl that extracts pages). The crawl's main process holds one interpreter lock for fetching,
  the stages and ingest; chunking, embedding and formatting a crawl's vectors there took most of
  what indexing's Python cost the crawl. That process loads the embedder once (``default_embedder``
  is cached per process) and keeps its per-word cache between jobs. A job that fails or times out
  (the process crashed or hung) is done in-process instead, and so is the rest of the run's: the
  text is never lost, the run goes on.

The vectors are not text: each chunk's is a row of a binary COPY (:func:`vector_rows`: the text
hash, the ordinal and the vector as pgvector receives it, float4 big-endian), which ingest copies
into a temporary table and joins to the chunk rows (gleaner.retrieval.vectors). Formatting each
float as text, carrying it in the statement's JSON and parsing it back was most of what writing a
vector cost, in Python and in PostgreSQL; the float4s stored are the embedder's, unrounded.

Only texts that need chunks are sent (SearchIndex asks which of a batch's texts would enter the
index and have none): an unchanged text is never chunked or embedded again.
"""

from __future__ import annotations

import json
import logging
import struct
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gleaner.retrieval.chunks import chunk_text, embedding_input

if TYPE_CHECKING:
    from gleaner.extract.pool import ExtractPool
    from gleaner.retrieval.embedder import Embedder

log = logging.getLogger(__name__)

PREPARE_TIMEOUT = 300.0  # seconds a job may wait behind extraction and run before it is done in-process


@dataclass(frozen=True, slots=True)
class NewText:
    """A canonical text without chunks yet: its bytes and its span ledger (JSON, as stored)."""

    text_hash: str
    text: bytes
    spans_json: str


@dataclass(frozen=True, slots=True)
class PreparedText:
    """One text's chunk rows as JSON objects joined by commas (no brackets), so a batch's payload is
    the wanted texts' rows joined: ``h o s e hd t``; when embedded, ``vectors``: their binary COPY
    rows (:func:`vector_rows`), joined likewise, and ``signs`` their sign bits (the fresh scan's,
    gleaner.retrieval.fresh_scan), for the chunks ``ordinals``."""

    text_hash: str
    rows_json: str
    chunks: int
    vectors: bytes = b""
    signs: bytes = b""
    ordinals: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Prepared:
    texts: dict[str, PreparedText]
    model: str | None  # the embedder's name, or None: rows without vectors
    dimension: int | None


def vector_rows(keys: Sequence[tuple[str, int]], vectors: Sequence[Sequence[float]]) -> bytes:
    """The binary COPY rows (no header) of ``(text_hash, ordinal, vector)``, one per key: each field
    a length and its bytes; the vector as pgvector's receive function reads it (int16 dimension,
    int16 zero, the float4s big-endian)."""
    import numpy as np

    if not keys:
        return b""
    values = np.asarray(vectors, dtype=">f4")
    dimension = int(values.shape[1])
    vector_head = struct.pack(">ihh", 4 + 4 * dimension, dimension, 0)
    out = bytearray()
    for (text_hash, ordinal), row in zip(keys, values, strict=True):
        key = text_hash.encode("utf-8")
        out += struct.pack(">hi", 3, len(key))
        out += key
        out += struct.pack(">ii", 4, ordinal)
        out += vector_head
        out += row.tobytes()
    return bytes(out)


def prepare_texts(texts: Sequence[NewText], embedder: Embedder | None) -> Prepared:
    """Chunk each text (gleaner.retrieval.chunks) and, with an embedder, embed its chunks."""
    rows: dict[str, list[str]] = {}
    keys: list[tuple[str, int]] = []
    inputs: list[str] = []
    for new in texts:
        body = new.text
        rows[new.text_hash] = []
        for c in chunk_text(body, json.loads(new.spans_json)):
            rows[new.text_hash].append(json.dumps(
                {"h": new.text_hash, "o": c.ordinal, "s": c.start, "e": c.end, "hd": c.heading,
                 "t": body[c.start:c.end].decode("utf-8", "replace")}, separators=(",", ":"), ensure_ascii=False))
            if embedder is not None:
                keys.append((new.text_hash, c.ordinal))
                inputs.append(embedding_input(body, c))
    vectors: dict[str, bytes] = {}
    signs: dict[str, bytes] = {}
    if embedder is not None and keys:
        from gleaner.retrieval.fresh_scan import sign_bits

        made = embedder.embed(inputs)
        start = 0
        for text_hash, chunks in rows.items():  # keys are in text order: a text's vectors are one slice
            vectors[text_hash] = vector_rows(keys[start:start + len(chunks)], made[start:start + len(chunks)])
            signs[text_hash] = sign_bits(made[start:start + len(chunks)])
            start += len(chunks)
    ordinals: dict[str, list[int]] = {}
    for text_hash, ordinal in keys:
        ordinals.setdefault(text_hash, []).append(ordinal)
    return Prepared({h: PreparedText(h, ",".join(p), len(p), vectors.get(h, b""), signs.get(h, b""),
                                     tuple(ordinals.get(h, ()))) for h, p in rows.items()},
                    embedder.model if embedder is not None else None,
                    embedder.dimension if embedder is not None else None)


def prepare_in_worker(texts: Sequence[NewText], model: str | None, cache_dir: str | None) -> Prepared:
    """:func:`prepare_texts` in an extraction process, with that process's one embedder (``model``
    an EmbedModel value, or None: chunks only)."""
    embedder = None
    if model is not None:
        from gleaner.retrieval.embedder import EmbedModel, default_embedder

        embedder = default_embedder(EmbedModel(model), Path(cache_dir) if cache_dir else None)
    return prepare_texts(texts, embedder)


class Pending(Protocol):
    def result(self) -> Prepared | None: ...


class ChunkPreparer(Protocol):
    """Where new texts are chunked and embedded.

    ``offloads``: whether :meth:`start` runs elsewhere (then SearchIndex sends the texts before its
    transaction and collects them inside it); ``start(texts, embed)`` begins the work, and the
    pending result is None when it failed (the caller prepares in-process)."""

    @property
    def offloads(self) -> bool: ...

    def start(self, texts: Sequence[NewText], embed: bool) -> Pending: ...

    def here(self, texts: Sequence[NewText], embed: bool) -> Prepared: ...


@dataclass(frozen=True, slots=True)
class _Done:
    prepared: Prepared | None

    def result(self) -> Prepared | None:
        return self.prepared


class InProcessPreparer:
    """In the caller's process, with the inline embedder (None: chunks without vectors)."""

    offloads = False

    def __init__(self, inline_embedder: Callable[[], Embedder | None]) -> None:
        self._inline_embedder = inline_embedder

    def here(self, texts: Sequence[NewText], embed: bool) -> Prepared:
        # Asked only when there are new chunks: the model loads on the first page that needs it.
        return prepare_texts(texts, self._inline_embedder() if embed and texts else None)

    def start(self, texts: Sequence[NewText], embed: bool) -> Pending:
        return _Done(self.here(texts, embed))


class _Submitted:
    def __init__(self, future: Future[Prepared], failed: Callable[[], None]) -> None:
        self._future = future
        self._failed = failed

    def result(self) -> Prepared | None:
        try:
            return self._future.result(timeout=PREPARE_TIMEOUT)
        except Exception as exc:  # a crashed worker, a broken pool, a timeout: done in-process instead
            self._future.cancel()
            self._failed()
            log.warning("chunking and embedding in an extraction process failed (%s: %s); done in-process",
                        type(exc).__name__, exc)
            return None


class PooledPreparer:
    """In the extraction processes when they are running, else in-process.

    ``model``: the EmbedModel value the workers load, or None where this process's inline embedder
    decides per call (an override, a model that is not inline): then nothing is offloaded.
    """

    def __init__(self, pool: Callable[[], ExtractPool], model: str | None, cache_dir: Path | None,
                 local: InProcessPreparer) -> None:
        self._pool = pool
        self._model = model
        self._cache_dir = str(cache_dir) if cache_dir else None
        self._local = local
        self.sent = 0  # texts sent to the extraction processes (tests and infra/bench read it)
        self.failed = False  # a job failed: the rest of this process's texts are prepared in-process

    @property
    def offloads(self) -> bool:
        if self._model is None or self.failed:
            return False
        pool = self._pool()
        return pool.workers > 1 and pool.started

    def _fail(self) -> None:
        self.failed = True

    def here(self, texts: Sequence[NewText], embed: bool) -> Prepared:
        return self._local.here(texts, embed)

    def start(self, texts: Sequence[NewText], embed: bool) -> Pending:
        if not texts or not self.offloads:
            return _Done(self.here(texts, embed))
        try:
            future = self._pool().call_aside(prepare_in_worker, list(texts), self._model if embed else None,
                                       self._cache_dir)
        except Exception as exc:  # the pool closed or broke: in-process
            self.failed = True
            log.warning("extraction processes unavailable for chunking (%s); done in-process", exc)
            return _Done(self.here(texts, embed))
        self.sent += len(texts)
        return _Submitted(future, self._fail)
