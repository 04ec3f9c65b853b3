"""The reference layer fed by the feed poller: the feed-article ledger, reference items, the quality log and
their search."""
