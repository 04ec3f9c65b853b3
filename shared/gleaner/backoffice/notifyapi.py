"""The API's notifications: subscriptions (disable / enable), the delivery log, retrying one delivery.

Split from api.py by concern (it builds on api.py's helpers; api.py re-exports these handlers).
A disabled or removed subscription's deliveries are cancelled and a retry of one is refused (409).
"""

from __future__ import annotations

from typing import Any

from gleaner.app import Deps
from gleaner.backoffice.api import (
    DEFAULT_PAGE,
    MAX_PAGE,
    ApiRequest,
    HttpError,
    check_uuid,
    choice_field,
    int_arg,
    json_body,
)
from gleaner.changes import delivery
from gleaner.changes.subscriptions import SubscriptionStatus
from gleaner.store.notifications.deliveries import Requeue


def get_subscriptions(deps: Deps, req: ApiRequest) -> dict[str, Any]:
    return {"subscriptions": [s.public() for s in deps.metadata.listed_subscriptions()]}


def get_deliveries(deps: Deps, req: ApiRequest) -> dict[str, Any]:
    sub = req.query.get("subscription") or None
    if sub is not None:
        sub = check_uuid(sub, "subscription")
    limit = int_arg(req.query, "limit", DEFAULT_PAGE, 1, MAX_PAGE)
    assert limit is not None
    if req.access.is_operator:
        return {"deliveries": deps.metadata.delivery_log(sub, limit)}
    # Deliveries carry no site: a site sees those of its own subscriptions (row-level security on those).
    own = {s.id for s in deps.metadata.listed_subscriptions()}
    if sub is not None and sub not in own:
        raise HttpError(404, f"no subscription {sub}")
    found = [d for s in ([sub] if sub else sorted(own)) for d in deps.metadata.delivery_log(s, limit)]
    found.sort(key=lambda d: (d["created_at"], d["id"]), reverse=True)
    return {"deliveries": found[:limit]}


def post_retry(deps: Deps, req: ApiRequest, delivery_id: str) -> dict[str, Any]:
    delivery_id = check_uuid(delivery_id, "delivery")
    visible = deps.browse.delivery_subscription(delivery_id) is not None
    requeued = deps.metadata.requeue_delivery(delivery_id) if visible else Requeue.NOT_FOUND
    if requeued is Requeue.SUBSCRIPTION_REMOVED:
        raise HttpError(409, "its subscription was removed: nothing is sent to it any more")
    if requeued is Requeue.SUBSCRIPTION_DISABLED:
        raise HttpError(409, "its subscription is disabled: enable it first (its pending deliveries were cancelled)")
    if requeued is not Requeue.REQUEUED:
        raise HttpError(404, f"no pending or failed delivery {delivery_id}")
    result = delivery.attempt(deps, delivery_id, due_only=False)
    return {"delivery_id": delivery_id, "result": result.value}


def post_subscription(deps: Deps, req: ApiRequest, subscription_id: str) -> dict[str, Any]:
    """Disable or enable a subscription: disabling cancels its pending deliveries."""
    subscription_id = check_uuid(subscription_id, "subscription")
    status = choice_field(json_body(req), "status", tuple(s.value for s in SubscriptionStatus))
    changed = deps.metadata.set_subscription_status(subscription_id, SubscriptionStatus(status))
    if changed is None:
        raise HttpError(404, f"no subscription {subscription_id}")
    return {"subscription": changed.public()}
