"""Canonical texts the extraction processes computed, kept for the ingest stage of the same process.

Ingest derives a snapshot's canonical text, hashes and spans from its content.md;
the extraction processes already derived them from the same bytes. When every
stage runs in one process (the in-process bus, ``gleaner crawl``), ingest takes
them from here by content hash (SHA1 of those bytes) instead of reading the blob
back and computing them again. An entry is a pure function of the bytes its key
names, so taking it is exactly what recomputing would give; a miss (a stage in
another process, an evicted entry, a redelivery) only costs that recomputation.
"""

from __future__ import annotations

import threading

from gleaner.provenance.canonical import CanonicalText


class CanonicalHandover:
    """A bounded map content hash -> CanonicalText; the oldest entries go first once over ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: dict[str, CanonicalText] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def put(self, content_hash: str, text: CanonicalText) -> None:
        size = _size(text)
        if size > self.max_bytes:
            return
        with self._lock:
            if content_hash in self._entries:
                return
            self._entries[content_hash] = text
            self._bytes += size
            while self._bytes > self.max_bytes:
                self._bytes -= _size(self._entries.pop(next(iter(self._entries))))

    def take(self, content_hash: str) -> CanonicalText | None:
        """The entry for content_hash, removed (ingest stores a text once), or None."""
        with self._lock:
            text = self._entries.pop(content_hash, None)
            if text is not None:
                self._bytes -= _size(text)
            return text

    def __len__(self) -> int:
        return len(self._entries)


def _size(text: CanonicalText) -> int:
    return len(text.text) + len(text.spans_json)
