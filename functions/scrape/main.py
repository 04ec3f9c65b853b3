"""scrape: the Cloud Tasks target; the body is one encoded ScrapeBatch (at most 100 URLs)."""

import flask
import functions_framework

from gleaner import entry
from gleaner.messages import ScrapeBatch

entry.setup_logging()


@functions_framework.http
def on_http(request: flask.Request) -> entry.HttpResponse:
    return entry.run_task(request, ScrapeBatch)
