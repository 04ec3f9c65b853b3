"""The Cloud Tasks targets: scrape batches (the scrape function) and webhook deliveries (notify).

Split from :mod:`gleaner.cloud.entry` (which decodes and maps Pub/Sub and the other HTTP triggers); the
error mapping is the one drawn there::

    Cloud Tasks HTTP (scrape)    ScrapeBatch   400 bad input, 200 acked, 200 deferred   503 (Cloud Tasks retries);
                                                                                         last attempt: record, 200
    Cloud Tasks HTTP (notify)    DeliveryTask  400 bad input, 200 delivered or done     503 (the receiver failed)

A scrape batch first takes one of its site's batch slots (:mod:`gleaner.cloud.siteleases`); when they
are all taken the batch is handed back to the queue for later and the task answers 200 at once; while
it runs its lease is renewed, and when it ends it sends the batch waiting longest for that slot.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, TypeVar

from gleaner.app import Deps, process_deps
from gleaner.cloud.entry import HttpResponse, _dispatch, _json_response, _read_body, _stage_of
from gleaner.errors import InvalidInput
from gleaner.messages import DeliveryTask, Message, ScrapeBatch, decode
from gleaner.serving.web import BodyRefused

log = logging.getLogger("gleaner.cloud.entry")

M = TypeVar("M", bound=Message)

# Cloud Tasks tells the handler how many times this task was retried before (0 on the first try).
TASK_RETRY_HEADER = "X-CloudTasks-TaskRetryCount"
# Delivery tasks created before the notify function existed arrive on scrape's on_http at this path.
DELIVERY_PATH = "/notify/deliver"


def run_task(request: Any, expect: type[M] = ScrapeBatch, deps: Deps | None = None) -> HttpResponse:  # type: ignore[assignment]
    """scrape's on_http: the Cloud Tasks target (body = one encoded ScrapeBatch).

    Cloud Tasks retries every non-2xx answer, so a permanent failure of a well-formed task answers
    200; on the queue's last attempt the failure is recorded on the batch's URLs and answered 200.
    """
    from gleaner import logs

    with logs.delivery(_stage_of(expect), request.headers):
        return _run_task(request, expect, deps)


def _run_task(request: Any, expect: type[M], deps: Deps | None) -> HttpResponse:
    from gleaner import logs
    from gleaner.cloud import siteleases

    deps = deps if deps is not None else process_deps()
    message = _task_message(request, expect, deps)
    if isinstance(message, tuple):
        return message
    logs.label(run_id=getattr(message, "run_id", None), site_domain=getattr(message, "site_domain", None))
    attempt = _task_attempt(request.headers)
    lease = None
    try:
        if isinstance(message, ScrapeBatch):
            taken = siteleases.take(deps, message)
            if isinstance(taken, siteleases.Deferred):
                return _json_response({"outcome": "deferred", "retry_in": round(taken.seconds, 3),
                                       "task": taken.task_name}, 200)
            if isinstance(taken, siteleases.RunElsewhere):
                return _json_response({"outcome": "run-by-other-copy", "task": taken.task_name}, 200)
            lease = taken
        with siteleases.kept(deps, lease):
            outcome = _dispatch(message, deps)
    except Exception as exc:
        if attempt is not None and attempt >= deps.settings.max_delivery_attempts:
            from gleaner.runtime.deadletters import record_failure

            record_failure(message, deps, f"gave up after {attempt} task attempts: {exc}")
            log.error("gave up on task %s after %s attempts: %s", getattr(message, "task_name", "?"), attempt, exc,
                      extra={"fields": {"event": logs.Event.TASK_GAVE_UP.value}})
            return _json_response({"outcome": "gave-up", "reason": str(exc)}, 200)
        log.warning("task %s will be retried (attempt %s): %s", getattr(message, "task_name", "?"), attempt, exc)
        return _json_response({"error": "transient failure; retry", "reason": str(exc)}, 503)
    finally:
        siteleases.give_back(deps, lease)
    return _json_response({"outcome": outcome}, 200)


def _task_message(request: Any, expect: type[M], deps: Deps) -> M | HttpResponse:
    """The task's message, or the answer to a task that carries none (405, 413, 400)."""
    if request.method != "POST":
        return _json_response({"error": "use POST"}, 405)
    try:
        body = _read_body(request, deps.settings.webhook_max_bytes)
        message = decode(body, expect)
    except BodyRefused as exc:
        return _json_response({"error": "task body too large" if exc.status == 413 else exc.message}, exc.status)
    except InvalidInput as exc:
        log.error("rejecting malformed task: %s", exc)
        return _json_response({"error": str(exc)}, 400)
    assert isinstance(message, expect)
    return message


def _task_attempt(headers: Mapping[str, str]) -> int | None:
    raw = headers.get(TASK_RETRY_HEADER)
    if raw is None or not raw.strip().isdigit():
        return None
    return int(raw) + 1


def run_delivery_task(request: Any, deps: Deps | None = None) -> HttpResponse:
    """notify's on_http: one webhook delivery attempt (body = one encoded DeliveryTask); Cloud Tasks
    backs off and retries.

    200 when delivered, when there is nothing left to do (delivered before, cancelled) and on the
    queue's last attempt (the delivery is then marked failed); 503 when the receiver failed and the
    task should come back; 400 for a malformed task.
    """
    from gleaner import logs

    with logs.delivery("notify", request.headers):
        return _run_delivery_task(request, deps)


def _run_delivery_task(request: Any, deps: Deps | None) -> HttpResponse:
    from gleaner.changes.delivery import AttemptResult, attempt

    deps = deps if deps is not None else process_deps()
    message = _task_message(request, DeliveryTask, deps)
    if isinstance(message, tuple):
        return message
    tried = _task_attempt(request.headers)
    last = tried is not None and tried >= deps.settings.notify_max_attempts
    result = attempt(deps, message.delivery_id, due_only=False, last=last)
    status = 503 if result is AttemptResult.RETRY else 200
    return _json_response({"outcome": str(result)}, status)
