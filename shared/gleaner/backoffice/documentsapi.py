"""The API's documents: one document with its versions, one version's body, the diff of two.

Split from api.py by concern (it builds on api.py's helpers; api.py re-exports these handlers).
"""

from __future__ import annotations

import re
from typing import Any

from gleaner.app import Deps
from gleaner.backoffice.api import ApiRequest, HttpError, check_uuid, int_arg
from gleaner.changes.diff import diff_versions, previous_version


def _document(deps: Deps, document_id: str) -> dict[str, Any]:
    doc = deps.browse.document(check_uuid(document_id, "document"))
    if doc is None:
        raise HttpError(404, f"no document {document_id}")
    return doc


def get_document(deps: Deps, req: ApiRequest, document_id: str) -> dict[str, Any]:
    doc = _document(deps, document_id)
    versions = deps.metadata.snapshots_of(doc["id"])
    for v in versions:
        v["current"] = v["id"] == doc["current_snapshot_id"]
    text = deps.provenance.current_text(doc["id"])  # the citable bytes: what /v1/texts/{text_hash} slices
    current_text = {"text_hash": text.text_hash, "version": text.version, "length": len(text.body)} if text else None
    erasure = deps.metadata.erasure_of(doc["id"]) if doc.get("status") == "erased" else None
    return {"document": doc, "versions": versions, "citations": deps.browse.citations_of(doc["id"]),
            "current_text": current_text, "erasure": erasure}


def _version(deps: Deps, doc: dict[str, Any], number: int) -> dict[str, Any]:
    for v in deps.metadata.snapshots_of(doc["id"]):
        if v["version"] == number:
            return v
    raise HttpError(404, f"{doc['url']} has no version {number}")


def read_body(deps: Deps, ref: str | None) -> str:
    if not ref:
        return ""
    try:
        return deps.blobs.get(ref).decode("utf-8", errors="replace")
    except KeyError:  # the blob port's "absent": pruned or erased
        raise HttpError(404, f"the body {ref} is no longer in the blob store") from None


def get_version(deps: Deps, req: ApiRequest, document_id: str, number: str) -> dict[str, Any]:
    doc = _document(deps, document_id)
    if not re.fullmatch(r"[0-9]{1,9}", number):
        raise HttpError(400, "the version must be a positive integer")
    raw = req.query.get("raw", "0")
    if raw not in ("0", "1"):
        raise HttpError(400, "raw must be 0 or 1")
    version = _version(deps, doc, int(number))
    ref = version["raw_ref"] if raw == "1" else version["content_ref"]
    return {"document_id": doc["id"], "url": doc["url"], "version": version["version"], "raw": raw == "1",
            "body": read_body(deps, ref)}


def document_diff(deps: Deps, doc: dict[str, Any], from_version: int | None, to_version: int | None
                  ) -> dict[str, Any]:
    """``diff --json``'s shape plus side-by-side rows; defaults as ``gleaner diff``: previous -> current."""
    from gleaner.backoffice.sidebyside import side_by_side

    versions = deps.metadata.snapshots_of(doc["id"])
    if to_version is None:
        current = next((v for v in versions if v["id"] == doc["current_snapshot_id"]), None)
        if current is None:
            raise HttpError(404, f"{doc['url']} has no version yet")
        to_version = int(current["version"])
        if from_version is None:
            from_version = previous_version(versions, doc["current_snapshot_id"])
    new = _version(deps, doc, to_version)
    old = _version(deps, doc, from_version) if from_version is not None else None
    old_body = read_body(deps, old["content_ref"]) if old else ""
    new_body = read_body(deps, new["content_ref"])
    result = diff_versions(doc["url"], old_body, new_body, from_version, to_version).to_dict()
    result["rows"] = [r.to_dict() for r in side_by_side(old_body, new_body)]
    return result


def get_diff(deps: Deps, req: ApiRequest, document_id: str) -> dict[str, Any]:
    doc = _document(deps, document_id)
    from_version = int_arg(req.query, "from", None, 1)
    to_version = int_arg(req.query, "to", None, 1)
    return {"document_id": doc["id"], "url": doc["url"], **document_diff(deps, doc, from_version, to_version)}
