"""The outbox: recorded change events go out after their commit, on `documents-changed` and to webhooks.

Events are rows of ``knowledge.document_events`` written in the transaction of their change;
:func:`flush` claims the unpublished ones (``FOR UPDATE SKIP LOCKED``, so concurrent instances share
the work), creates one delivery per matching subscription (keyed by subscription and event, so a
second flush creates none), announces each event on the bus and marks it published, in one
transaction. A crash before the commit publishes the same events again: the topic is at least once,
and consumers deduplicate on ``event_id`` (webhook receivers on ``webhook-id``, the same value).

Deliveries are then handed to the bus (:meth:`Bus.enqueue_delivery`): a Cloud Task each in the
cloud; locally the database is the queue, worked by the run before it returns and by
``gleaner deliver`` (:mod:`gleaner.changes.delivery`).
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime

import sqlalchemy as sa

from gleaner.app import Deps
from gleaner.changes import subscriptions
from gleaner.changes.events import ChangeEvent, event_from_row, events_columns
from gleaner.errors import GleanerError
from gleaner.messages import GLEANER_NS

log = logging.getLogger(__name__)

# Events claimed per transaction.
FLUSH_BATCH = 500


def delivery_id(subscription_id: str, event_id: str) -> str:
    return str(uuid.uuid5(GLEANER_NS, f"delivery:{subscription_id}:{event_id}"))


def webhook_body(event: ChangeEvent) -> str:
    """The body every attempt of a delivery sends, byte for byte (DESIGN.md)."""
    return json.dumps({"type": event.type, "timestamp": event.occurred_at, "data": event.to_dict()},
                      separators=(",", ":"))


def flush(deps: Deps) -> int:
    """Publish every unpublished event and schedule its deliveries; how many events went out."""
    engine = deps.engine
    published = 0
    subs = subscriptions.active(engine)
    while True:
        with engine.begin() as conn:
            rows = conn.execute(
                sa.text(f"SELECT {events_columns()}, e.seq FROM knowledge.document_events e"
                        " WHERE e.published_at IS NULL ORDER BY e.seq LIMIT :n FOR UPDATE SKIP LOCKED"),
                {"n": FLUSH_BATCH},
            ).all()
            if not rows:
                break
            deliveries = []
            for row in rows:
                event = event_from_row(row)
                occurred = datetime.fromisoformat(event.occurred_at)
                for sub in subs:
                    # A subscription receives the events of its site and types from its creation on.
                    if sub.site_domain not in (None, event.site_domain) or (sub.types and event.type not in sub.types):
                        continue
                    if datetime.fromisoformat(sub.created_at) > occurred:
                        continue
                    deliveries.append({"i": delivery_id(sub.id, event.event_id), "s": sub.id, "e": event.event_id,
                                       "q": row[11], "b": webhook_body(event)})
                deps.bus.announce(event)
            if deliveries:
                conn.execute(
                    sa.text("INSERT INTO knowledge.notify_deliveries (id, subscription_id, event_id, event_seq, body)"
                            " SELECT t.i, t.s, t.e, t.q, t.b FROM json_to_recordset(CAST(:rows AS json))"
                            " AS t(i uuid, s uuid, e uuid, q bigint, b text) ON CONFLICT DO NOTHING"),
                    {"rows": json.dumps(deliveries)},
                )
            conn.execute(sa.text("UPDATE knowledge.document_events SET published_at = now()"
                                 " WHERE seq = ANY(CAST(:q AS bigint[]))"), {"q": [r[11] for r in rows]})
        published += len(rows)
        if len(rows) < FLUSH_BATCH:
            break
    schedule(deps)
    return published


def flush_after_commit(deps: Deps) -> int:
    """:func:`flush` for a stage that has done its own work: a failure to publish is logged, not raised.

    The stage's hand-off to the next one is already out; its events stay in the outbox and go with
    the next flush (any stage, the run's end, ``gleaner deliver``), so a topic or queue problem never
    makes a stage redo or drop its work.
    """
    try:
        return flush(deps)
    except GleanerError as exc:
        log.warning("change events stay in the outbox for the next flush: %s", exc)
        return 0


def schedule(deps: Deps) -> int:
    """Hand pending, unscheduled deliveries to the bus's delivery queue; how many it took."""
    with deps.engine.connect() as conn:
        ids = [str(i) for i in conn.execute(sa.text(
            "SELECT id FROM knowledge.notify_deliveries WHERE state = 'pending' AND NOT scheduled ORDER BY created_at"
        )).scalars()]
    taken = [i for i in ids if deps.bus.enqueue_delivery(i)]
    if taken:
        with deps.engine.begin() as conn:
            conn.execute(sa.text("UPDATE knowledge.notify_deliveries SET scheduled = true"
                                 " WHERE id = ANY(CAST(:i AS uuid[]))"), {"i": taken})
    return len(taken)
