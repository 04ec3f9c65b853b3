"""Webhook deliveries: one attempt, the retry schedule, the log of every attempt.

An attempt claims its delivery with a lease (one short UPDATE: no lock is held across the network),
checks the target again under the address policy and connects to the address it checked (no second
lookup), POSTs the stored body with fresh Standard Webhooks headers (``webhook-id`` = the event id on
every attempt; the timestamp is the attempt's, so receivers' ±5 minute window holds on late retries),
and records the attempt. A 2xx delivers; anything else (a redirect too: targets are not followed)
is retried after ``notify_retry_seconds * 2**(attempt-1)`` until ``notify_max_attempts``.

Who attempts: locally the run before it returns (:func:`deliver_due` with a wait) and
``gleaner deliver``; in the cloud a Cloud Task per delivery whose handler (:func:`run_task`, on the
ingest function's ``/notify/deliver``) makes one attempt and lets Cloud Tasks back off.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import httpx
import sqlalchemy as sa

from gleaner.app import Deps
from gleaner.changes import signing
from gleaner.changes.subscriptions import checked_target
from gleaner.errors import PolicyRefused

log = logging.getLogger(__name__)

# The longest pause between two attempts, however many came before.
MAX_BACKOFF_SECONDS = 3600.0


class AttemptResult(StrEnum):
    DELIVERED = "delivered"
    RETRY = "retry"  # failed; another attempt is due later
    FAILED = "failed"  # failed for the last time
    SKIPPED = "skipped"  # not pending (delivered, cancelled) or leased by another worker


@dataclass(frozen=True, slots=True)
class Response:
    status: int | None
    error: str | None
    ms: int


def backoff(attempt: int, first: float) -> float:
    """Seconds after the attempt-th failure before the next attempt."""
    return float(min(first * 2 ** max(attempt - 1, 0), MAX_BACKOFF_SECONDS))


def post(deps: Deps, url: str, body: str, headers: dict[str, str]) -> Response:
    """POST body to url under the address policy, connecting to the checked address; never raises."""
    started = time.monotonic()
    settings = deps.settings
    try:
        checked, address = checked_target(url, settings.allow_networks)
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


def attempt(deps: Deps, delivery: str, *, due_only: bool = True, last: bool = False) -> AttemptResult:
    """One attempt of one delivery. ``last``: the caller will not try again (the queue's last attempt)."""
    settings = deps.settings
    lease = settings.notify_timeout + 30.0
    with deps.engine.begin() as conn:
        row = conn.execute(
            sa.text(
                "UPDATE knowledge.notify_deliveries d SET attempts = d.attempts + 1,"
                " next_attempt_at = now() + make_interval(secs => :lease)"
                " FROM knowledge.notify_subscriptions s"
                " WHERE d.id = CAST(:i AS uuid) AND s.id = d.subscription_id AND d.state = 'pending'"
                " AND (NOT :due OR d.next_attempt_at <= now())"
                " RETURNING d.attempts, d.body, d.event_id, s.url, s.secret"
            ),
            {"i": delivery, "lease": lease, "due": due_only},
        ).first()
    if row is None:
        return AttemptResult.SKIPPED
    number, body, event_id, url, secret = int(row[0]), str(row[1]), str(row[2]), str(row[3]), str(row[4])
    response = post(deps, url, body, signing.headers(secret, event_id, int(time.time()), body))
    ok = response.status is not None and 200 <= response.status < 300
    final = not ok and (last or number >= settings.notify_max_attempts)
    result = AttemptResult.DELIVERED if ok else AttemptResult.FAILED if final else AttemptResult.RETRY
    state = {AttemptResult.DELIVERED: "delivered", AttemptResult.FAILED: "failed"}.get(result, "pending")
    with deps.engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO knowledge.notify_attempts (delivery_id, attempt, http_status, error, duration_ms)"
                    " VALUES (CAST(:i AS uuid), :n, :st, :err, :ms)"),
            {"i": delivery, "n": number, "st": response.status, "err": response.error, "ms": response.ms},
        )
        conn.execute(
            sa.text("UPDATE knowledge.notify_deliveries SET state = :state, last_status = :st, last_error = :err,"
                    " next_attempt_at = now() + make_interval(secs => :wait),"
                    " delivered_at = CASE WHEN :state = 'delivered' THEN now() ELSE delivered_at END"
                    " WHERE id = CAST(:i AS uuid)"),
            {"i": delivery, "state": state, "st": response.status, "err": response.error,
             "wait": backoff(number, settings.notify_retry_seconds)},
        )
    log.info("webhook delivery %s attempt %d to %s: %s", delivery, number, url,
             response.status if response.status is not None else response.error)
    return result


def _due(deps: Deps) -> tuple[list[str], float | None]:
    """Pending deliveries due now, and the seconds until the next one that is not (None: none pending)."""
    with deps.engine.connect() as conn:
        due = [str(i) for i in conn.execute(sa.text(
            "SELECT id FROM knowledge.notify_deliveries WHERE state = 'pending' AND next_attempt_at <= now()"
            " ORDER BY next_attempt_at, created_at")).scalars()]
        wait = conn.execute(sa.text(
            "SELECT EXTRACT(EPOCH FROM min(next_attempt_at) - now()) FROM knowledge.notify_deliveries"
            " WHERE state = 'pending' AND next_attempt_at > now()")).scalar()
    return due, float(wait) if wait is not None else None


def deliver_due(deps: Deps, *, wait_seconds: float = 0.0) -> dict[str, int]:
    """Attempt every due delivery; keep retrying those that come due within ``wait_seconds``.

    Returns counts by result. Deliveries still pending afterwards stay due for ``gleaner deliver``.
    """
    counts: dict[str, int] = {}
    deadline = time.monotonic() + wait_seconds
    while True:
        due, next_in = _due(deps)
        for delivery in due:
            result = attempt(deps, delivery)
            counts[result] = counts.get(result, 0) + 1
        if time.monotonic() >= deadline:
            break
        if due:
            continue  # failures just scheduled their retries: look again
        if next_in is None or time.monotonic() + next_in > deadline:
            break
        time.sleep(max(next_in, 0.05))
    return counts


def send_test(deps: Deps, subscription_id: str) -> Response:
    """POST a signed ``webhook.test`` message to a subscription now (logged like any attempt)."""
    import json
    import uuid

    from gleaner.changes import subscriptions

    sub = subscriptions.get(deps.engine, subscription_id)
    if sub is None:
        raise PolicyRefused(f"no subscription {subscription_id}")
    msg_id = str(uuid.uuid4())
    body = json.dumps({"type": "webhook.test", "timestamp": _now_iso(),
                       "data": {"subscription_id": sub.id, "message": "a test from gleaner notify test"}},
                      separators=(",", ":"))
    response = post(deps, sub.url, body, signing.headers(sub.secret, msg_id, int(time.time()), body))
    ok = response.status is not None and 200 <= response.status < 300
    with deps.engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO knowledge.notify_deliveries (id, subscription_id, event_id, body, state, attempts,"
                    " last_status, last_error, delivered_at, scheduled)"
                    " VALUES (CAST(:i AS uuid), CAST(:s AS uuid), CAST(:i AS uuid), :b, :state, 1, :st, :err,"
                    " CASE WHEN :state = 'delivered' THEN now() END, true)"),
            {"i": msg_id, "s": sub.id, "b": body, "state": "delivered" if ok else "failed", "st": response.status,
             "err": response.error},
        )
        conn.execute(
            sa.text("INSERT INTO knowledge.notify_attempts (delivery_id, attempt, http_status, error, duration_ms)"
                    " VALUES (CAST(:i AS uuid), 1, :st, :err, :ms)"),
            {"i": msg_id, "st": response.status, "err": response.error, "ms": response.ms},
        )
    return response


def _now_iso() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat()


def deliveries(deps: Deps, subscription_id: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
    """The delivery log, newest first, each with its attempts."""
    with deps.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT d.id, d.subscription_id, d.event_id, e.type::text, e.url, d.state, d.attempts, d.last_status,"
                " d.last_error, d.next_attempt_at, d.created_at, d.delivered_at"
                " FROM knowledge.notify_deliveries d LEFT JOIN knowledge.document_events e ON e.seq = d.event_seq"
                " WHERE CAST(:s AS text) IS NULL OR CAST(d.subscription_id AS text) = :s"
                " ORDER BY d.created_at DESC, d.id LIMIT :n"
            ),
            {"s": subscription_id, "n": limit},
        ).all()
        attempts = conn.execute(
            sa.text("SELECT delivery_id, attempt, at, http_status, error, duration_ms FROM knowledge.notify_attempts"
                    " WHERE delivery_id = ANY(CAST(:i AS uuid[])) ORDER BY delivery_id, attempt"),
            {"i": [str(r[0]) for r in rows]},
        ).all()
    by_delivery: dict[str, list[dict[str, Any]]] = {}
    for a in attempts:
        by_delivery.setdefault(str(a[0]), []).append(
            {"attempt": a[1], "at": a[2].isoformat(), "status": a[3], "error": a[4], "ms": a[5]})
    keys = ("id", "subscription_id", "event_id", "type", "url", "state", "attempts", "last_status", "last_error",
            "next_attempt_at", "created_at", "delivered_at")
    out = []
    for r in rows:
        item = dict(zip(keys, (str(r[0]), str(r[1]), str(r[2]), r[3] or "webhook.test", *r[4:9],
                               r[9].isoformat() if r[9] else None, r[10].isoformat(),
                               r[11].isoformat() if r[11] else None), strict=True))
        item["log"] = by_delivery.get(item["id"], [])
        out.append(item)
    return out


def requeue(deps: Deps, delivery_id: str) -> bool:
    """Make a pending or failed delivery due now (an operator's retry); False when there is none."""
    with deps.engine.begin() as conn:
        row = conn.execute(
            sa.text("UPDATE knowledge.notify_deliveries SET state = 'pending', next_attempt_at = now()"
                    " WHERE id = CAST(:i AS uuid) AND state IN ('pending', 'failed') RETURNING id"),
            {"i": delivery_id},
        ).first()
    return row is not None
