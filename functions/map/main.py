"""map: crawl requests over HTTP (Cloud Scheduler, the console, the CLI) and from `crawl-requests`.

`on_http` authenticates and validates the request, publishes it to `crawl-requests` and answers
202 with the run id; `on_event` (that topic's push subscription) runs the map stage. It also
receives the dead-letter topic, whose messages are recorded as failures rather than run again.
"""

import flask
import functions_framework
from cloudevents.http import CloudEvent

from gleaner.cloud import entry
from gleaner.messages import CrawlRequested

entry.setup_logging()


@functions_framework.http
def on_http(request: flask.Request) -> entry.HttpResponse:
    return entry.run_crawl_request(request)


@functions_framework.cloud_event
def on_event(cloud_event: CloudEvent) -> None:
    entry.run_event(cloud_event, CrawlRequested)
