"""Digests: one message per period (``--digest 1h|1d``) listing the period's events per site.

A digest is a delivery like any other (same queue, leases, attempts, retries), made durable by the
database rather than by a process's memory:

- the outbox files each event a digest subscription receives as an *item* of the digest of the
  period it is published in (:func:`period`, UTC-aligned), creating that digest's delivery with its
  first item, keyed by (subscription, period start) (:func:`digest_id`) and due at the period's end;
- the delivery's first attempt *seals* it: in the transaction that claims it, its items become its
  body (:func:`sealed_body`), which every later attempt sends unchanged. An event published while a
  digest is being sealed waits for the seal's row lock and then goes to the next period: an item is
  in exactly one digest (its key is (subscription, event)), and none is added after the seal.

So a restart loses nothing (items and periods are rows), a redelivered event adds no second item,
and a delivered digest is not sent again (it is no longer pending). Locally the background sender
finds a digest when it comes due like any retry; in the cloud its Cloud Task is created with the
period's end as its schedule time.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from gleaner.messages import GLEANER_NS

DIGEST_TYPE = "notify.digest"


def period(at: datetime, seconds: int) -> tuple[datetime, datetime]:
    """The period of ``seconds`` (aligned on the Unix epoch, so hours and days start on UTC boundaries) holding at."""
    epoch = int(at.timestamp())
    start = datetime.fromtimestamp(epoch - epoch % seconds, UTC)
    return start, start + timedelta(seconds=seconds)


def digest_id(subscription_id: str, start: datetime) -> str:
    return str(uuid.uuid5(GLEANER_NS, f"digest:{subscription_id}:{int(start.timestamp())}"))


def sealed_body(start: datetime, until: datetime, items: list[str]) -> str:
    """A digest's body: its events as webhooks carry them (``data`` of each), oldest first."""
    events: list[Any] = [json.loads(i) for i in items]
    return json.dumps({"type": DIGEST_TYPE, "timestamp": until.isoformat(),
                       "data": {"period_start": start.isoformat(), "period_end": until.isoformat(),
                                "events": events}}, separators=(",", ":"))
