"""``GET /v1/texts/{text_hash}?start=&end=``: a slice of stored canonical text, as ``(status, body)``.

Framework-free like :func:`gleaner.references.webhook.handle`: any router (the webhook's,
the back office's ``/v1``) passes the path's hash and the query.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gleaner.app import Deps
from gleaner.errors import InvalidInput
from gleaner.provenance.slices import MAX_SLICE_BYTES, parse_range, slice_text_bytes

_HASH = re.compile(r"^[0-9a-f]{64}$")


def text_slice(deps: Deps, text_hash: str, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
    if not _HASH.match(text_hash):
        return 400, {"error": "a text hash is 64 lower-case hex digits (BLAKE3)"}
    body = deps.provenance.text_bytes(text_hash)
    if body is None:
        return 404, {"error": f"no canonical text {text_hash}"}
    try:
        start, end = parse_range(query, len(body))
        if end - start > MAX_SLICE_BYTES:
            raise InvalidInput(f"a slice is at most {MAX_SLICE_BYTES} bytes; ask for a narrower range")
        piece = slice_text_bytes(text_hash, body, start, end, whole_characters=True)
    except InvalidInput as exc:
        return 400, {"error": str(exc)}
    return 200, {**piece.to_dict(), "length": len(body)}
