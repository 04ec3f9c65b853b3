"""Keeping the copy current and saying what changed: lifecycle, change events, the outbox, webhooks.

- ``events``: the event shape and its identity (one per change, idempotent by business identity);
- ``lifecycle``: ``documents.status`` transitions and the events they emit;
- ``outbox``: publishing recorded events on `documents-changed` and fanning them out to subscriptions;
- ``subscriptions``: Standard Webhooks subscriptions (``gleaner notify``);
- ``signing``: the Standard Webhooks signature;
- ``delivery``: one delivery attempt, retries with backoff.

These decide on values and run no SQL: the rows live behind ``deps.metadata`` (``store/notifications/events.py``,
``store/documents/lifecycle.py``, ``store/notifications/subscriptions.py``, ``store/notifications/deliveries.py``).
"""
