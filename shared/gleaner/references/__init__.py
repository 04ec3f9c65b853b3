"""Feed articles as reference items (seed 000): everything the feature does, in one folder.

- ``webhook.py``: the feed poller's HTTP surface (``POST /`` batches and walks, ``GET /refs/…``), as
  one framework-free handler that ``gleaner serve`` and the ingest function both mount;
- ``landing.py``: the stage that lands accepted articles as reference items (fetch, extract, keep);
- ``url_policy.py``: which article URLs may be fetched; ``identity.py``: reference ids and tenant.

Its rows live behind ``gleaner.store.references``; its commands are ``gleaner refs …``
(``gleaner.cli.references``).
"""
