"""scrape: the Cloud Tasks target. POST / carries one encoded ScrapeBatch (at most 100 URLs). Several
batches of different sites share an instance (terraform: its request concurrency); webhook deliveries
have their own function (functions/notify), and those queued for /notify/deliver before it existed
are still served here."""

import flask
import functions_framework

from gleaner.cloud import entry, taskentry
from gleaner.messages import ScrapeBatch

entry.setup_logging()


@functions_framework.http
def on_http(request: flask.Request) -> entry.HttpResponse:
    if request.path.rstrip("/") == taskentry.DELIVERY_PATH:
        return taskentry.run_delivery_task(request)
    return taskentry.run_task(request, ScrapeBatch)
