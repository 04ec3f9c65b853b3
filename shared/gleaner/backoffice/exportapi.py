"""``GET /v1/sites/{site}/export?format=jsonl&spans=1&raw=1``: ``gleaner export --format jsonl`` over HTTP, streamed.

The lines are :func:`gleaner.exporting.exportformats.jsonl_lines`, the very ones the command writes to
``documents.jsonl``, sent as ``application/x-ndjson`` while they are made: documents are listed a
page at a time and each body is read from the blob store as its line is sent, so a large site
streams in flat memory. A site token exports its own site only (row-level security; another site
answers 404). Parquet is a file format, not a stream: it stays the command's.

The first line is made before the answer starts, so a site whose first body is missing answers
404 like any route; a failure after that cuts the connection (the chunked body never ends), so a
reader cannot mistake a truncated export for a whole one.
"""

from __future__ import annotations

from collections.abc import Iterator

from gleaner.app import Deps
from gleaner.backoffice.request import ApiRequest, HttpError, Stream, check_site, choice_arg
from gleaner.exporting.exportformats import BodyMissing, ExportFormat, jsonl_lines

NDJSON = "application/x-ndjson"


def flag_arg(req: ApiRequest, name: str) -> bool:
    value = choice_arg(req.query, name, ("0", "1"))
    return value == "1"


def get_export(deps: Deps, req: ApiRequest, site: str) -> Stream:
    site = check_site(deps, site)
    fmt = choice_arg(req.query, "format", tuple(ExportFormat)) or ExportFormat.JSONL
    if fmt != ExportFormat.JSONL:
        raise HttpError(400, f"format={fmt} is written to a file by `gleaner export SITE DIR --format {fmt}`;"
                             " over HTTP the export streams as format=jsonl")
    lines = jsonl_lines(deps, site, raw=flag_arg(req, "raw"), spans=flag_arg(req, "spans"))
    return Stream(_missing_as_404(lines), NDJSON)


def _missing_as_404(lines: Iterator[bytes]) -> Iterator[bytes]:
    try:
        yield from lines
    except BodyMissing as exc:
        raise HttpError(404, str(exc)) from None
