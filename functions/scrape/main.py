"""scrape: the Cloud Tasks target. POST / carries one encoded ScrapeBatch (at most 100 URLs);
POST /notify/deliver one DeliveryTask of the notify queue (one webhook delivery attempt)."""

import flask
import functions_framework

from gleaner import entry
from gleaner.messages import ScrapeBatch

entry.setup_logging()


@functions_framework.http
def on_http(request: flask.Request) -> entry.HttpResponse:
    if request.path.rstrip("/") == entry.DELIVERY_PATH:
        return entry.run_delivery_task(request)
    return entry.run_task(request, ScrapeBatch)
