"""Feed articles as reference items (seed 000): everything the feature does but its HTTP surface.

- ``gleaner.serving.webhook`` (in the HTTP surface's room): the feed poller's ``POST /`` batches and walks and
  ``GET /refs/…``, as one framework-free handler that ``gleaner serve`` and the ingest function both mount;
- ``landing.py``: the stage that lands accepted articles as reference items (fetch, extract, keep);
- ``url_policy.py``: which article URLs may be fetched; ``identity.py``: reference ids and tenant.

Its rows live behind ``gleaner.store.feeds.references``; its commands are ``gleaner refs …``
(``gleaner.cli.references``).
"""
