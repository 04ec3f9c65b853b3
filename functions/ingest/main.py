"""ingest: canonical text and spans for new snapshots (`snapshots-written`); the feed-poller webhook."""

import flask
import functions_framework
from cloudevents.http import CloudEvent

from gleaner import entry
from gleaner.messages import SnapshotsWritten

entry.setup_logging()


@functions_framework.cloud_event
def on_event(cloud_event: CloudEvent) -> None:
    entry.run_event(cloud_event, SnapshotsWritten)


# The feed-poller webhook (DESIGN.md "Feed-poller webhook") lands with issue 5 as
# `return webhook.handle(request)` from gleaner.webhook. Until then the deployed endpoint
# answers 501, so Terraform, Cloud Scheduler's walk nudge and this file already agree.
@functions_framework.http
def on_http(request: flask.Request) -> entry.HttpResponse:
    return entry.not_implemented(request, "the feed-poller webhook")
