"""Deliveries (webhooks and channels): one attempt, the retry schedule, the log of every attempt.

An attempt claims its delivery with a lease (one short UPDATE: no lock is held across the network),
checks the target again under the address policy and connects to the address it checked (no second
lookup), POSTs the stored body with fresh Standard Webhooks headers (``webhook-id`` = the event id on
every attempt; the timestamp is the attempt's, so receivers' ±5 minute window holds on late retries),
and records the attempt. A 2xx delivers; anything else (a redirect too: targets are not followed)
is retried after ``notify_retry_seconds * 2**(attempt-1)`` until ``notify_max_attempts``.
A channel subscription (Slack, e-mail … :mod:`gleaner.changes.channels`) gets the same claim, lease,
log and retries; its attempt renders the stored body as a readable message
(:mod:`gleaner.changes.notices`) and sends it through Apprise under the address policy.

Who attempts: locally the run before it returns (:func:`deliver_due` with a wait) and
``gleaner deliver``; in the cloud a Cloud Task per delivery whose handler
(:func:`gleaner.cloud.taskentry.run_delivery_task`, the notify function) makes one attempt and lets
Cloud Tasks back off.

The queue, the leases and the log are :mod:`gleaner.store.notifications.deliveries`' (``deps.metadata``); the log
is read with ``deps.metadata.delivery_log()``.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING

import httpx

from gleaner.changes import channels, notices, signing
from gleaner.changes.subscriptions import checked_target
from gleaner.errors import PolicyRefused
from gleaner.store.notifications.deliveries import DeliveryState, Response
from gleaner.tenancy import across_tenants

if TYPE_CHECKING:
    from gleaner.app import Deps

log = logging.getLogger(__name__)

# The longest pause between two attempts, however many came before.
MAX_BACKOFF_SECONDS = 3600.0


class AttemptResult(StrEnum):
    DELIVERED = "delivered"
    RETRY = "retry"  # failed; another attempt is due later
    FAILED = "failed"  # failed for the last time
    SKIPPED = "skipped"  # not pending (delivered, cancelled) or leased by another worker


def backoff(attempt: int, first: float) -> float:
    """Seconds after the attempt-th failure before the next attempt."""
    return float(min(first * 2 ** max(attempt - 1, 0), MAX_BACKOFF_SECONDS))


def post(deps: Deps, url: str, body: str, headers: dict[str, str]) -> Response:
    """POST body to url under the address policy, connecting to the checked address; never raises."""
    started = time.monotonic()
    settings = deps.settings
    try:
        checked, address = checked_target(url, settings.allow_networks, deps.resolver_override)
    except PolicyRefused as exc:
        return Response(None, str(exc), 0)
    default_port = 443 if checked.wire.scheme == "https" else 80
    host_header = checked.host if checked.port == default_port else f"{checked.host}:{checked.port}"
    if ":" in checked.host:
        host_header = f"[{checked.host}]" + ("" if checked.port == default_port else f":{checked.port}")
    target = httpx.URL(url).copy_with(host=address)
    request_headers = {**headers, "Host": host_header, "Content-Type": "application/json",
                       "User-Agent": settings.user_agent}
    try:
        with httpx.Client(trust_env=False, follow_redirects=False, timeout=settings.notify_timeout,
                          verify=deps.tls_context) as client:
            request = client.build_request("POST", target, content=body.encode("utf-8"), headers=request_headers,
                                           extensions={"sni_hostname": checked.host})
            response = client.send(request, stream=True)  # the answer's body is never read
            response.close()
    except httpx.HTTPError as exc:
        return Response(None, f"{type(exc).__name__}: {exc}"[:500], int((time.monotonic() - started) * 1000))
    return Response(response.status_code, None, int((time.monotonic() - started) * 1000))


@across_tenants  # a delivery's subscription may cover every site
def attempt(deps: Deps, delivery: str, *, due_only: bool = True, last: bool = False) -> AttemptResult:
    """One attempt of one delivery. ``last``: the caller will not try again (the queue's last attempt)."""
    settings = deps.settings
    claimed = deps.metadata.claim_delivery(delivery, settings.notify_timeout + 30.0, due_only)
    if claimed is None:
        return AttemptResult.SKIPPED
    response = send(deps, claimed.url, claimed.body, claimed.secret, claimed.event_id)
    result = judge(response, claimed.attempt, last=last, max_attempts=settings.notify_max_attempts)
    deps.metadata.record_attempt(delivery, claimed.attempt, response, _STATE[result],
                                 backoff(claimed.attempt, settings.notify_retry_seconds))
    log.info("delivery %s attempt %d to %s: %s", delivery, claimed.attempt, channels.masked(claimed.url),
             response.status if response.status is not None else response.error or "sent")
    return result


def send(deps: Deps, url: str, body: str, secret: str, message_id: str) -> Response:
    """One attempt's send: a channel gets the readable message, a webhook the signed body; never raises."""
    if channels.is_channel(url):
        notice = notices.render(body, lambda data: notices.gather(deps, data))
        return channels.send(url, notice.title, notice.body, allow=deps.settings.allow_networks,
                             timeout=deps.settings.notify_timeout, resolver=deps.resolver_override)
    return post(deps, url, body, signing.headers(secret, message_id, int(time.time()), body))


def judge(response: Response, attempt: int, *, last: bool, max_attempts: int) -> AttemptResult:
    """A 2xx delivers; anything else is retried until the last attempt."""
    if response.ok:
        return AttemptResult.DELIVERED
    return AttemptResult.FAILED if last or attempt >= max_attempts else AttemptResult.RETRY


# The delivery's state after an attempt with this result.
_STATE = {AttemptResult.DELIVERED: DeliveryState.DELIVERED, AttemptResult.FAILED: DeliveryState.FAILED,
          AttemptResult.RETRY: DeliveryState.PENDING}


@across_tenants
def deliver_due(deps: Deps, *, wait_seconds: float = 0.0, stop: threading.Event | None = None,
                poll: float = 1.0) -> dict[str, int]:
    """Attempt every due delivery; keep retrying those that come due within ``wait_seconds``.

    ``stop`` ends the work between two attempts: a caller that must not wait runs this on a thread
    (:class:`gleaner.changes.sender.DeliverySender`) and stops it. While waiting, new deliveries are
    looked for at least every ``poll`` seconds. Returns counts by result; deliveries still pending
    afterwards stay due for the next sender.
    """
    counts: dict[str, int] = {}
    deadline = time.monotonic() + wait_seconds
    stop = stop or threading.Event()

    def over() -> bool:
        return stop.is_set() or time.monotonic() >= deadline

    while True:
        due, next_in = deps.metadata.due_deliveries()
        for delivery in due:
            if stop.is_set():
                break
            result = attempt(deps, delivery)
            counts[result] = counts.get(result, 0) + 1
        if over():
            break
        if due:
            continue  # failures just scheduled their retries: look again
        # A bounded wait ends when nothing comes due in time; an unbounded one (a sender) keeps looking.
        if math.isfinite(wait_seconds) and (next_in is None or time.monotonic() + next_in > deadline):
            break
        stop.wait(poll if next_in is None else min(max(next_in, 0.05), poll))
    return counts


def send_test(deps: Deps, subscription_id: str) -> Response:
    """POST a signed ``webhook.test`` message to a subscription now (logged like any attempt)."""
    sub = deps.metadata.subscription(subscription_id)
    if sub is None:
        raise PolicyRefused(f"no subscription {subscription_id}")
    msg_id = str(uuid.uuid4())
    body = json.dumps({"type": "webhook.test", "timestamp": datetime.now(UTC).isoformat(),
                       "data": {"subscription_id": sub.id, "message": "a test from gleaner notify test"}},
                      separators=(",", ":"))
    response = send(deps, sub.url, body, sub.secret, msg_id)
    deps.metadata.record_test_delivery(msg_id, sub.id, body, response)
    return response
