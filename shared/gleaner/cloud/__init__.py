"""The cloud's entry points: the Cloud Functions' handlers (Pub/Sub and Cloud Tasks), the render service's
handler, the site leases that cap a site's concurrent scrape batches, and who an HTTP caller is."""
