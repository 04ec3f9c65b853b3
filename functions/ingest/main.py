"""ingest: canonical text and spans for new snapshots; the feed-poller webhook and its landings.

- ``on_event``: `snapshots-written` (canonical text and span ledger of new snapshots);
- ``on_articles``: `articles-accepted` (land accepted feed articles as reference items). A 2nd-gen
  function has one event trigger, so this source is deployed a second time with this target;
- ``on_http``: the feed-poller webhook (POST /) and reference retrieval (GET /refs, /refs/{id}).
"""

import functions_framework

from gleaner import entry
from gleaner.messages import ArticlesAccepted, SnapshotsWritten

entry.setup_logging()


@functions_framework.cloud_event
def on_event(cloud_event):  # type: ignore[no-untyped-def]
    entry.run_event(cloud_event, SnapshotsWritten)


@functions_framework.cloud_event
def on_articles(cloud_event):  # type: ignore[no-untyped-def]
    entry.run_event(cloud_event, ArticlesAccepted)


@functions_framework.http
def on_http(request):  # type: ignore[no-untyped-def]
    return entry.run_webhook(request)
