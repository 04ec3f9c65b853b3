"""ingest: canonical text and spans for new snapshots; the feed-poller webhook and its landings.

- ``on_event``: the push subscriptions of `snapshots-written` (canonical text and span ledger of
  new snapshots) and of `articles-accepted` (land accepted feed articles as reference items);
- ``on_http``: the feed-poller webhook (POST /), reference retrieval (GET /refs, /refs/{id}) and
  canonical text slices (GET /v1/texts/). The back office is its own function (functions/backoffice).
"""

import flask
import functions_framework
from cloudevents.http import CloudEvent

from gleaner.cloud import entry
from gleaner.messages import ArticlesAccepted, SnapshotsWritten

entry.setup_logging()


@functions_framework.cloud_event
def on_event(cloud_event: CloudEvent) -> None:
    entry.run_event(cloud_event, (SnapshotsWritten, ArticlesAccepted))


@functions_framework.http
def on_http(request: flask.Request) -> entry.HttpResponse:
    return entry.run_webhook(request)
