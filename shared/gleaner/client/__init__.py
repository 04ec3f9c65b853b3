"""A Python client of a Gleaner server's ``/v1/`` API (``gleaner serve``, or the back office in the cloud).

::

    from gleaner.client import Gleaner

    with Gleaner("http://127.0.0.1:8080", token="glt_...") as gleaner:
        run = gleaner.crawl("example.com")                    # start a crawl of a registered site
        for record in gleaner.export("example.com"):          # the site's current pages, streamed
            print(record["url"], record["version"])

``Gleaner()`` with no arguments reads ``GLEANER_URL`` and ``GLEANER_TOKEN``. Every method is one route
(``Gleaner.ROUTES`` says which; a test checks that together with ``NOT_COVERED`` they are every route
of the server's OpenAPI document). Errors are :class:`ApiError` (the server's status and message) or
:class:`ServerUnreachable`; see :mod:`gleaner.client.errors`.
"""

from gleaner.client.errors import ApiError, ExportCut, GleanerError, ServerUnreachable
from gleaner.client.gleaner import NOT_COVERED, Gleaner
from gleaner.client.records import ChangeEvent, ExportRecord, RunSummary, SearchHit, Span, TextSlice

__all__ = ["NOT_COVERED", "ApiError", "ChangeEvent", "ExportCut", "ExportRecord", "Gleaner", "GleanerError",
           "RunSummary", "SearchHit", "ServerUnreachable", "Span", "TextSlice"]
