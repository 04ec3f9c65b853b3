"""snapshot: version the pages a scrape batch fetched (`pages-fetched`)."""

import functions_framework
from cloudevents.http import CloudEvent

from gleaner.cloud import entry
from gleaner.messages import PagesFetched

entry.setup_logging()


@functions_framework.cloud_event
def on_event(cloud_event: CloudEvent) -> None:
    entry.run_event(cloud_event, PagesFetched)
