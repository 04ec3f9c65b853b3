"""``GET /v1/texts/{text_hash}?start=&end=``: a slice of stored canonical text, as ``(status, body)``.

Framework-free like :func:`gleaner.serving.webhook.handle`: any router (the webhook's,
the back office's ``/v1``) passes the path's hash and the query. Every reader of canonical
text (this route, ``gleaner slice``, the MCP ``get`` tool) goes through :func:`read_text`, so
they agree on who reads what:

    reader      reads                                               any other text
    operator    every text (the shared secret, the CLI)             -
    site        the texts of its own site's versions                404, as if absent
    workspace   the texts of references its workspace's feed brought   404

Row-level security makes the site's answer (a text is visible to a tenant exactly when one of
its versions uses it: gleaner.store.access.rls); the workspace's is narrowed to its own feed's pages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gleaner import tenancy
from gleaner.app import Deps
from gleaner.errors import InvalidInput
from gleaner.provenance.slices import MAX_SLICE_BYTES, parse_range, slice_text_bytes

_HASH = re.compile(r"^[0-9a-f]{64}$")


class ReaderKind(StrEnum):
    OPERATOR = "operator"
    SITE = "site"
    WORKSPACE = "workspace"


@dataclass(frozen=True, slots=True)
class TextReader:
    """Who asks for a text: the operator, a site (its token) or a workspace (its token)."""

    kind: ReaderKind
    name: str | None = None  # the site domain or workspace id

    @classmethod
    def operator(cls) -> TextReader:
        return cls(ReaderKind.OPERATOR)

    @classmethod
    def site(cls, site_domain: str) -> TextReader:
        return cls(ReaderKind.SITE, site_domain)

    @classmethod
    def workspace(cls, workspace_id: str) -> TextReader:
        return cls(ReaderKind.WORKSPACE, workspace_id)


def read_text(deps: Deps, text_hash: str, reader: TextReader) -> bytes | None:
    """The text's bytes if ``reader`` may read it, else None (the same answer as for an unknown text)."""
    if reader.kind is ReaderKind.OPERATOR:
        with tenancy.all_tenants():
            return deps.provenance.text_bytes(text_hash)
    if reader.kind is ReaderKind.SITE and reader.name:
        with tenancy.scope(reader.name):
            return deps.provenance.text_bytes(text_hash)
    if reader.kind is ReaderKind.WORKSPACE and reader.name:
        from gleaner.references.identity import REFERENCES_SITE

        with tenancy.scope(REFERENCES_SITE):
            return deps.provenance.workspace_text_bytes(text_hash, reader.name)
    return None


def text_slice(deps: Deps, text_hash: str, query: Mapping[str, str],
               reader: TextReader) -> tuple[int, dict[str, Any]]:
    if not _HASH.match(text_hash):
        return 400, {"error": "a text hash is 64 lower-case hex digits (BLAKE3)"}
    body = read_text(deps, text_hash, reader)
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
