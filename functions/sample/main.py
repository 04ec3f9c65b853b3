"""sample: decide include / exclude per URL of a mapped run, then schedule the scrape tasks."""

import functions_framework
from cloudevents.http import CloudEvent

from gleaner.cloud import entry
from gleaner.messages import CrawlMapped

entry.setup_logging()


@functions_framework.cloud_event
def on_event(cloud_event: CloudEvent) -> None:
    entry.run_event(cloud_event, CrawlMapped)
