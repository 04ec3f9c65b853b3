"""``gleaner export``: a site's current markdown as a directory tree plus ``manifest.jsonl``.

:func:`export_paths` is the pure part: URL paths become safe relative file paths (``/`` ->
``index.md``, ``/docs/install`` -> ``docs/install.md``). Nothing a site serves can escape the
directory: every segment is reduced to ``[A-Za-z0-9._-]``, ``.`` and ``..`` are renamed, a query
becomes a hash suffix, long segments are cut and hashed. Two URLs that land on one path (or on paths
that differ only in case, which case-insensitive file systems merge) are told apart the same way on
every export: URLs sorted, the first keeps the plain path, the others get their URL hash appended.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# File names stay well under the 255 bytes most file systems allow.
MAX_SEGMENT = 120


def _segment(raw: str) -> str:
    text = _UNSAFE.sub("_", unquote(raw)).strip("_") or "_"
    if set(text) <= {"."}:
        text = "_" + text.replace(".", "_")
    if len(text) > MAX_SEGMENT:
        text = text[:MAX_SEGMENT - 9] + "-" + hashlib.sha1(raw.encode("utf-8")).hexdigest()[:8]
    return text


def export_path(url: str) -> str:
    """The relative POSIX path (``.md``) for one URL, before collisions are resolved."""
    parts = urlsplit(url)
    segments = [_segment(s) for s in parts.path.split("/") if s]
    if not segments:
        segments = ["index"]
    stem = segments[-1]
    if parts.query:
        stem += "_q" + hashlib.sha1(parts.query.encode("utf-8")).hexdigest()[:8]
    segments[-1] = stem
    return str(PurePosixPath(*segments)) + ".md"


def export_paths(urls: Iterable[str]) -> dict[str, str]:
    """url -> unique relative path, the same for the same set of URLs on every run."""
    taken: set[str] = set()
    out: dict[str, str] = {}
    for url in sorted(set(urls)):
        path = export_path(url)
        if path.lower() in taken:
            suffix = hashlib.sha1(url.encode("utf-8")).hexdigest()[:10]
            path = path[: -len(".md")] + f"-{suffix}.md"
        taken.add(path.lower())
        out[url] = path
    return out


def write_export(directory: Path, items: list[dict[str, Any]], bodies: dict[str, bytes],
                 erased: Iterable[str] = ()) -> int:
    """Write each item's body at its path and the manifest; items carry url, version, content_hash,
    fetched_at and ``ref`` (the key ``bodies`` is indexed by). Erased pages get a manifest line
    ``{"url": <erased form>, "erased": true}`` and no file. Returns how many files were written."""
    root = directory.resolve()
    root.mkdir(parents=True, exist_ok=True)
    paths = export_paths(item["url"] for item in items)
    lines = []
    for item in sorted(items, key=lambda i: paths[i["url"]]):
        relative = paths[item["url"]]
        target = (root / relative).resolve()
        if root not in target.parents:  # cannot happen with the segments above; never write outside
            raise ValueError(f"export path {relative!r} leaves {root}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(bodies[item["ref"]])
        lines.append(json.dumps({"url": item["url"], "path": relative, "version": item["version"],
                                 "content_hash": item["content_hash"], "fetched_at": item["fetched_at"]}))
    written = len(lines)
    lines += [json.dumps({"url": form, "erased": True}) for form in sorted(erased)]
    (root / "manifest.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return written
