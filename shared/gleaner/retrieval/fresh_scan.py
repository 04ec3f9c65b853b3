"""The fresh vectors' nearest to a query, found from their sign bits in this process (migration 0042).

Vectors not in the HNSW graph yet are searched by a scan, not the graph. Comparing each in SQL costs
a row read and a 384-float cosine each: over a large first crawl's fresh set (hundreds of thousands)
that is seconds a search. Each batch that writes fresh vectors also writes a ``fresh_segments`` row:
the chunks' keys and each vector's sign bits (one bit a dimension). :class:`FreshSigns` keeps those
segments in memory (loading the new ones, forgetting the merged ones, at each search), ranks every
fresh vector by the Hamming distance between its bits and the query's (numpy: a few milliseconds for
hundreds of thousands), and returns the nearest ``RESCORED`` keys; the candidate function then
compares their full vectors with the query exactly, so the answer's scores are exact cosines and
the bits only choose which vectors are compared. Sign bits keep the cosine order well: the nearest
few hundred by bits hold the exact nearest 50 with few misses (figures: infra/bench/fresh_scan.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

if TYPE_CHECKING:  # numpy is imported where it is used: the Cloud Functions do not install it
    import numpy as np

RESCORED = 1000  # keys per search whose full vectors are compared exactly (of every fresh vector)
# Below this many fresh vectors SQL compares every one (exact, and cheaper than looking up RESCORED
# keys one by one: a row read in a scan costs a fraction of a keyed lookup).
EXACT_BELOW = 5000

_INSERT = sa.text("INSERT INTO knowledge.fresh_segments (model, hashes, ordinals, signs)"
                  " VALUES (:m, CAST(:h AS text[]), CAST(:o AS int[]), :s)")
_IDS = sa.text("SELECT id FROM knowledge.fresh_segments WHERE model = :m")
_LOAD = sa.text("SELECT id, hashes, ordinals, signs FROM knowledge.fresh_segments"
                " WHERE id = ANY(CAST(:ids AS bigint[]))")


def sign_bits(vectors: Any) -> bytes:
    """Each vector's sign bits, packed: ``dimension / 8`` bytes a vector, in order."""
    import numpy as np

    values = np.asarray(vectors, dtype=np.float32)
    if values.size == 0:
        return b""
    return np.packbits(values > 0, axis=1).tobytes()


def write_segment(conn: Connection, model: str, keys: Sequence[tuple[str, int]], signs: bytes) -> None:
    """One segment for the fresh vectors just written in ``conn``'s transaction (so both commit or neither)."""
    if keys:
        conn.execute(_INSERT, {"m": model, "h": [h for h, _o in keys], "o": [o for _h, o in keys], "s": signs})


def nearest_rows(planes: np.ndarray[Any, Any], query: np.ndarray[Any, Any], count: int,
                 ties: Callable[[np.ndarray[Any, Any]], np.ndarray[Any, Any]] | None = None) -> np.ndarray[Any, Any]:
    """The rows (of ``planes``: sign bits as (words, vectors) uint64) of the ``count`` vectors nearest
    ``query`` by Hamming distance; ties at the last distance taken by ``ties(rows)`` (a value a row,
    smallest first: its key's, so that two stores holding the same vectors in another order pick the
    same rows; asked only of the tied rows), else in row order."""
    import numpy as np

    bits = np.frombuffer(np.packbits(query > 0).tobytes(), dtype=np.uint64)
    # One 64-bit plane at a time over every vector (contiguous), not six words a row: half the time.
    distance = np.zeros(planes.shape[1], dtype=np.uint16)
    for plane, word in zip(planes, bits, strict=True):
        distance += np.bitwise_count(plane ^ word)
    if count >= len(distance):
        return np.arange(len(distance))
    # The distance the count reaches (a histogram, not a partition of every row): all nearer, then ties.
    reach = int(np.searchsorted(np.cumsum(np.bincount(distance, minlength=64 * len(bits) + 1)), count))
    nearer = np.flatnonzero(distance < reach)
    tied = np.flatnonzero(distance == reach)
    if ties is not None and len(tied) > count - len(nearer):
        tied = tied[np.argsort(ties(tied), kind="stable")]
    return np.concatenate([nearer, tied[:count - len(nearer)]])


def _tie(text_hash: str, ordinal: int) -> int:
    """A chunk key's tie-break value: its text hash's first 48 bits, then its ordinal."""
    try:
        head = int(text_hash[:12], 16)
    except ValueError:  # not a hex digest: its first bytes
        head = int.from_bytes(text_hash.encode("utf-8", "replace")[:6], "big")
    return (head << 16) | (ordinal & 0xFFFF)


def _key_ties(ends: list[int], order: list[int], segments: dict[int, _Segment]) -> Callable[[Any], Any]:
    """``nearest_rows``' ties over these segments: each row's key's :func:`_tie`."""
    import numpy as np

    def ties(rows: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        hashes, ordinals = _keys(rows, ends, order, segments)
        return np.fromiter((_tie(h, o) for h, o in zip(hashes, ordinals, strict=True)), dtype=np.uint64,
                           count=len(hashes))

    return ties


@dataclass(frozen=True, slots=True)
class _Segment:
    hashes: list[str]
    ordinals: list[int]
    words: np.ndarray[Any, Any]  # (vectors, words) uint64: the sign bits


class FreshSigns:
    """A process's copy of the fresh segments of one model, shared by its searches (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._model = ""
        self._segments: dict[int, _Segment] = {}
        self._order: list[int] = []
        self._words: np.ndarray[Any, Any] | None = None  # every segment's bits, in _order: (words, vectors)
        self._ends: list[int] = []

    def nearest(self, conn: Connection, model: str, query: Sequence[float],
                count: int | None = None) -> tuple[list[str], list[int]] | tuple[None, None]:
        """The keys of the ``count`` (``RESCORED``) fresh vectors whose sign bits are nearest the query's;
        (None, None) when there are fewer than ``EXACT_BELOW`` (or none): then SQL compares them all."""
        import numpy as np

        count = RESCORED if count is None else count
        ids = [int(r[0]) for r in conn.execute(_IDS, {"m": model})]
        with self._lock:
            self._catch_up(conn, model, ids)
            words, ends, order = self._words, self._ends, self._order
            segments = self._segments
        if words is None or words.shape[1] < EXACT_BELOW:  # (none at all: SQL's scan of nothing costs nothing)
            return None, None
        picked = nearest_rows(words, np.asarray(query, dtype=np.float32), count, _key_ties(ends, order, segments))
        return _keys(picked, ends, order, segments)

    def nearest_each(self, conn: Connection, model: str, queries: Any, count: int,
                     exact_below: int) -> list[tuple[list[str], list[int]]] | None:
        """:meth:`nearest` for each row of ``queries`` (vectors), the segments caught up once; None when
        there are fewer than ``exact_below`` fresh vectors (then SQL compares them all)."""
        import numpy as np

        ids = [int(r[0]) for r in conn.execute(_IDS, {"m": model})]
        with self._lock:
            self._catch_up(conn, model, ids)
            words, ends, order = self._words, self._ends, self._order
            segments = self._segments
        if words is None or words.shape[1] < exact_below:
            return None
        ties = _key_ties(ends, order, segments)
        return [_keys(nearest_rows(words, q, count, ties), ends, order, segments)
                for q in np.asarray(queries, dtype=np.float32)]

    def _catch_up(self, conn: Connection, model: str, ids: list[int]) -> None:
        import numpy as np

        if model != self._model:
            self._model, self._segments = model, {}
        wanted = set(ids)
        new = [i for i in ids if i not in self._segments]
        gone = [i for i in self._segments if i not in wanted]
        if not new and not gone and self._words is not None:
            return
        for i in gone:
            del self._segments[i]
        if new:
            for r in conn.execute(_LOAD, {"ids": new}):
                hashes, ordinals, signs = list(r[1]), [int(o) for o in r[2]], bytes(r[3])
                if not hashes or len(signs) % (len(hashes) * 8):
                    continue  # not this process's layout (another dimension): never compared wrongly
                words = np.frombuffer(signs, dtype=np.uint64).reshape(len(hashes), -1)
                self._segments[int(r[0])] = _Segment(hashes, ordinals, words)
        self._order = sorted(self._segments)
        parts = [self._segments[i].words for i in self._order]
        widths = {p.shape[1] for p in parts}
        if len(widths) > 1:  # one model, one dimension: keep the most common width only
            width = max(widths, key=lambda w: sum(len(p) for p in parts if p.shape[1] == w))
            self._order = [i for i in self._order if self._segments[i].words.shape[1] == width]
            parts = [self._segments[i].words for i in self._order]
        self._words = np.ascontiguousarray(np.concatenate(parts).T) if parts else None
        self._ends = np.cumsum([len(p) for p in parts]).tolist()


def _keys(picked: np.ndarray[Any, Any], ends: list[int], order: list[int],
          segments: dict[int, _Segment]) -> tuple[list[str], list[int]]:
    """The (text hashes, ordinals) of rows of the concatenated segments."""
    import numpy as np

    where = np.searchsorted(ends, picked, side="right")
    hashes: list[str] = []
    ordinals: list[int] = []
    for row, seg_at in zip(picked.tolist(), where.tolist(), strict=True):
        segment = segments[order[seg_at]]
        offset = row - (ends[seg_at - 1] if seg_at else 0)
        hashes.append(segment.hashes[offset])
        ordinals.append(segment.ordinals[offset])
    return hashes, ordinals
