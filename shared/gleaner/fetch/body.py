"""Reading a response body under limits that refuse, never truncate.

An HTTP client left to itself decodes gzip/deflate/br transparently and without an
output bound, so one small brotli or deflate chunk could expand to gigabytes in
memory before any check ran. The transport turns that off (``auto_decompress=False``,
:mod:`gleaner.fetch.transport`); Gleaner reads the *raw* (wire) bytes and decodes them here,
asking zlib for at most the bytes still allowed, so both caps hold exactly:

* the wire cap (``max_body_bytes``): the declared Content-Length is refused before
  reading, a streamed body as soon as it passes the cap;
* the decoded cap (``max_decompressed_bytes``): a compression bomb is refused as soon
  as its output passes the cap.

Only ``gzip`` and ``deflate`` are advertised and accepted (Python decodes them with
an output bound); any other content coding is refused-content.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable

ACCEPT_ENCODING = "gzip, deflate"


class BodyRefused(Exception):
    """The body breaks a limit or cannot be decoded. ``kind`` is size, content or budget."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


def coding_of(content_encoding: str | None) -> str:
    """The one content coding of a response, or raise BodyRefused(content)."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return "identity"
    if len(codings) == 1 and codings[0] in ("gzip", "x-gzip", "deflate"):
        return "deflate" if codings[0] == "deflate" else "gzip"
    raise BodyRefused("content", f"content-encoding {content_encoding!r} not accepted")


class Decoder:
    """Incremental gzip/deflate decoding that never produces more than it is allowed (response bodies,
    and gzipped sitemaps, which arrive as bytes the server did not mark as encoded)."""

    def __init__(self, coding: str) -> None:
        self._coding = coding
        self._raw_fallback = coding == "deflate"  # "deflate" is zlib-wrapped or raw in the wild
        self._obj = zlib.decompressobj(16 + zlib.MAX_WBITS if coding == "gzip" else zlib.MAX_WBITS)
        self._first = True

    def feed(self, data: bytes, allowed: int) -> bytes:
        """Decode ``data``; raise BodyRefused(size) if the output would exceed ``allowed`` bytes."""
        if self._coding == "identity":
            if len(data) > allowed:
                raise BodyRefused("size", "")
            return data
        try:
            return self._drain(data, allowed)
        except zlib.error as exc:
            if self._first and self._raw_fallback:
                self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
                self._raw_fallback = False
                return self.feed(data, allowed)
            raise BodyRefused("content", f"corrupt {self._coding} body: {exc}") from exc
        finally:
            self._first = False

    def _drain(self, data: bytes, allowed: int) -> bytes:
        out: list[bytes] = []
        total = 0
        pending = data
        while True:
            chunk = self._obj.decompress(pending, allowed - total + 1)
            total += len(chunk)
            if total > allowed:
                raise BodyRefused("size", "")
            out.append(chunk)
            pending = self._obj.unconsumed_tail
            if not pending:
                return b"".join(out)

    def finish(self, allowed: int) -> bytes:
        if self._coding == "identity":
            return b""
        try:
            tail = self._obj.flush()
        except zlib.error as exc:
            raise BodyRefused("content", f"corrupt {self._coding} body: {exc}") from exc
        if len(tail) > allowed:
            raise BodyRefused("size", "")
        return tail


class BodyReader:
    """Feed a body's wire chunks as they arrive; :meth:`finish` gives (decoded body, wire bytes).

    Raises BodyRefused as soon as a limit breaks. ``on_wire`` is told of every chunk's wire size
    first (the run's byte budget), so a chunk that overruns the budget ends the run even if it
    would also be oversized.
    """

    def __init__(self, *, coding: str, max_wire: int, max_decoded: int,
                 on_wire: Callable[[int], None] | None = None) -> None:
        self._decoder = Decoder(coding)
        self._max_wire = max_wire
        self._max_decoded = max_decoded
        self._on_wire = on_wire
        self._parts: list[bytes] = []
        self.wire = 0
        self._decoded = 0

    def feed(self, chunk: bytes) -> None:
        self.wire += len(chunk)
        if self._on_wire is not None:
            self._on_wire(len(chunk))
        if self.wire > self._max_wire:
            raise BodyRefused("size", f"body exceeds {self._max_wire} bytes on the wire")
        out = self._decode(self._decoder.feed, chunk)
        self._decoded += len(out)
        self._parts.append(out)

    def finish(self) -> tuple[bytes, int]:
        self._parts.append(self._decode(lambda _data, allowed: self._decoder.finish(allowed), b""))
        return b"".join(self._parts), self.wire

    def _decode(self, step: Callable[[bytes, int], bytes], chunk: bytes) -> bytes:
        try:
            return step(chunk, self._max_decoded - self._decoded)
        except BodyRefused as exc:
            if exc.kind == "size":
                raise BodyRefused("size", f"decoded body exceeds {self._max_decoded} bytes") from None
            raise


def read_body(raw_chunks: Iterable[bytes], *, coding: str, max_wire: int, max_decoded: int,
              on_wire: Callable[[int], None] | None = None) -> tuple[bytes, int]:
    """Read and decode a whole body; (decoded body, wire bytes). Raises BodyRefused on any limit."""
    reader = BodyReader(coding=coding, max_wire=max_wire, max_decoded=max_decoded, on_wire=on_wire)
    for chunk in raw_chunks:
        reader.feed(chunk)
    return reader.finish()
