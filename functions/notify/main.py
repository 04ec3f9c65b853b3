"""notify: the notify queue's target. POST / carries one encoded DeliveryTask (one webhook delivery
attempt). A function of its own, so a crawl filling the scrape instances never starves deliveries."""

import flask
import functions_framework

from gleaner.cloud import entry, taskentry

entry.setup_logging()


@functions_framework.http
def on_http(request: flask.Request) -> entry.HttpResponse:
    return taskentry.run_delivery_task(request)
