"""ingest: canonical text and spans for new snapshots (`snapshots-written`), and over HTTP the
feed-poller webhook plus reference retrieval (`gleaner.webhook`, via `entry.run_webhook`)."""

import functions_framework

from gleaner import entry
from gleaner.messages import SnapshotsWritten

entry.setup_logging()


@functions_framework.cloud_event
def on_event(cloud_event):  # type: ignore[no-untyped-def]
    entry.run_event(cloud_event, SnapshotsWritten)


@functions_framework.http
def on_http(request):  # type: ignore[no-untyped-def]
    return entry.run_webhook(request)
