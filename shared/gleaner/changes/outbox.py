"""The outbox: recorded change events go out after their commit, on `documents-changed` and to webhooks.

Events are rows of ``knowledge.document_events`` written in the transaction of their change;
:func:`flush` claims the unpublished ones (``FOR UPDATE SKIP LOCKED``, so concurrent instances share
the work: ``MetadataStore.publish_events``), creates one delivery per matching subscription (keyed
by subscription and event, so a second flush creates none), announces each event on the bus and
marks it published, in one transaction. A crash before the commit publishes the same events again:
the topic is at least once, and consumers deduplicate on ``event_id`` (webhook receivers on
``webhook-id``, the same value).

Deliveries are then handed to the bus (:meth:`Bus.enqueue_delivery`): a Cloud Task each in the
cloud; locally the database is the queue, worked by the run before it returns and by
``gleaner deliver`` (:mod:`gleaner.changes.delivery`).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gleaner.changes.events import ChangeEvent
from gleaner.changes.subscriptions import Subscription
from gleaner.errors import GleanerError
from gleaner.messages import GLEANER_NS
from gleaner.store.notifications.deliveries import NewDelivery, NewDigestItem
from gleaner.store.notifications.events import take_recorded
from gleaner.tenancy import across_tenants

if TYPE_CHECKING:
    from gleaner.app import Deps

log = logging.getLogger(__name__)

# Events claimed per transaction.
FLUSH_BATCH = 500


def delivery_id(subscription_id: str, event_id: str) -> str:
    return str(uuid.uuid5(GLEANER_NS, f"delivery:{subscription_id}:{event_id}"))


def webhook_body(event: ChangeEvent) -> str:
    """The body every attempt of a delivery sends, byte for byte (DESIGN.md)."""
    return json.dumps({"type": event.type, "timestamp": event.occurred_at, "data": event.to_dict()},
                      separators=(",", ":"))


def planned_deliveries(events: Sequence[ChangeEvent], subs: Sequence[Subscription],
                       ) -> list[NewDelivery | NewDigestItem]:
    """One delivery per event and subscription that receives it, keyed by both (a second plan is the same);
    for a digest subscription, an item of its current digest instead (:mod:`gleaner.changes.digest`)."""
    planned: list[NewDelivery | NewDigestItem] = []
    for event in events:
        for sub in subs:
            if not sub.receives(event):
                continue
            if sub.digest_seconds:
                planned.append(NewDigestItem(sub.id, sub.digest_seconds, event.event_id, event.site_domain,
                                             json.dumps(event.to_dict(), separators=(",", ":"))))
            else:
                planned.append(NewDelivery(delivery_id(sub.id, event.event_id), sub.id, event.event_id,
                                           webhook_body(event)))
    return planned


@across_tenants  # one outbox for every tenant: whoever commits next drains it
def flush(deps: Deps) -> int:
    """Publish every unpublished event and schedule its deliveries; how many events went out."""
    if deps.metadata.outbox_empty():
        return 0
    return _flush(deps, schedule_always=True)


@across_tenants
def _flush(deps: Deps, *, schedule_always: bool) -> int:
    meta = deps.metadata
    subs = meta.active_subscriptions()

    def publish(events: Sequence[ChangeEvent]) -> list[NewDelivery | NewDigestItem]:
        for event in events:
            deps.bus.announce(event)
        return planned_deliveries(events, subs)

    published = 0
    while claimed := meta.publish_events(FLUSH_BATCH, publish):
        published += claimed
        if claimed < FLUSH_BATCH:
            break
    if schedule_always or subs:  # with no subscription, no event of this flush made a delivery
        schedule(deps)
    return published


def flush_after_commit(deps: Deps) -> int:
    """:func:`flush` for a stage that has done its own work: a failure to publish is logged, not raised.

    The stage's hand-off to the next one is already out; its events stay in the outbox and go with
    the next flush (any stage, the run's end, ``gleaner deliver``), so a topic or queue problem never
    makes a stage redo or drop its work.

    A stage whose thread recorded no event since its last flush has nothing of its own to publish and
    skips even the outbox's emptiness read; one that did knows the outbox is not empty, and with no
    active subscription has no delivery to schedule. Whatever else waits goes with the next full
    :func:`flush` (the run's end, ``gleaner deliver``) or the next stage's that schedules.
    """
    if not take_recorded():
        return 0
    try:
        return _flush(deps, schedule_always=False)
    except GleanerError as exc:
        log.warning("change events stay in the outbox for the next flush: %s", exc)
        return 0


def schedule(deps: Deps) -> int:
    """Hand pending, unscheduled deliveries to the bus's delivery queue; how many it took."""
    taken = [i for i, not_before in deps.metadata.unscheduled_deliveries()
             if deps.bus.enqueue_delivery(i, not_before=not_before)]
    deps.metadata.mark_scheduled(taken)
    return len(taken)
