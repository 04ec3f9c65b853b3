"""What every Cloud Function entry point does: decode the trigger, run the stage, map the outcome.

``functions/<stage>/main.py`` only names its trigger and message type and calls
one function here, so envelope parsing and error mapping exist once::

    trigger                      decoded into         PermanentError            RetryableError / other
    Pub/Sub CloudEvent           the topic's message  log, return (ack)         raise (redeliver, then dead-letter)
    HTTP crawl request (map)     CrawlRequested       400 bad input             503 (caller retries)
    HTTP {"tick": true} (map)    due sites' crawls    -                         503 (Scheduler retries)
    HTTP {"sweep": true} (map)   idle runs settled    -                         503 (Scheduler retries)
    HTTP {"index": true} (map)   fresh vectors merged -                         503 (Scheduler retries)
    Cloud Tasks HTTP             scrape batches and webhook deliveries: :mod:`gleaner.cloud.taskentry`
    HTTP /v1/, /ui/ (backoffice) the back office      400/403/404/409           500 (the operator retries)

A message arriving from the dead-letter topic (it carries Pub/Sub's
``CloudPubSubDeadLetterSource*`` attributes) is not run again: its failure is
recorded on the run / URLs (:mod:`gleaner.runtime.deadletters`) and it is acknowledged.

Deps are per process (:func:`gleaner.app.process_deps`): the engine, clients and
pools live across invocations. Tests pass their own ``deps``.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from gleaner.app import Deps, process_deps
from gleaner.cloud.crawlrequest import crawl_request_from
from gleaner.errors import ConfigError, InvalidInput, PermanentError, RetryableError
from gleaner.messages import Message, decode
from gleaner.serving.web import BodyRefused, read_body

log = logging.getLogger("gleaner.cloud.entry")

HttpResponse = tuple[str, int, dict[str, str]]

DEAD_LETTER_ATTRIBUTE = "CloudPubSubDeadLetterSourceSubscription"


def setup_logging(env: Mapping[str, str] | None = None) -> None:
    """JSON lines at INFO on stdout for Cloud Logging (:mod:`gleaner.logs`) when deployed; called by each main.py.

    Every delivery checks again (:func:`gleaner.logs.delivery`), because functions-framework may
    reconfigure logging after this import. Elsewhere (a laptop, the emulator mode, tests loading
    main.py in-process) plain lines on stderr, as before.
    """
    import os

    from gleaner import logs
    from gleaner.settings.config import Settings

    environ = os.environ if env is None else env
    try:
        settings = Settings.from_env(environ)
        cloud, project = settings.cloud_logging, settings.project
    except ConfigError:  # the first delivery reports the bad setting; logging must still work
        cloud, project = bool(environ.get("K_SERVICE") or environ.get("LOG_EXECUTION_ID")), None
    if cloud:
        logs.install(project)
    elif not logging.getLogger().handlers:  # functions-framework on a laptop: readable lines on stderr
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")


def _stage_of(kind: type[Message]) -> str:
    """The stage label of a delivery (a message no stage consumes is labelled by its topic)."""
    from gleaner.stages import STAGES

    return STAGES[kind.topic][0] if kind.topic in STAGES else kind.topic


def _request_headers() -> Mapping[str, str]:
    """The headers of the HTTP request being served (a Pub/Sub push carries the trace too)."""
    try:
        import flask
    except ImportError:  # pragma: no cover - flask comes with functions-framework
        return {}
    return flask.request.headers if flask.has_request_context() else {}  # type: ignore[return-value]


def _json_response(body: Mapping[str, Any], status: int) -> HttpResponse:
    return json.dumps(body, sort_keys=True), status, {"Content-Type": "application/json"}


# -- Pub/Sub CloudEvents --------------------------------------------------------------------------


def pubsub_message(cloud_event: Any) -> tuple[bytes, dict[str, str]]:
    """The message bytes and attributes of a Pub/Sub CloudEvent (Eventarc or a converted push)."""
    data = getattr(cloud_event, "data", cloud_event)
    if not isinstance(data, Mapping) or not isinstance(data.get("message"), Mapping):
        raise InvalidInput("event carries no Pub/Sub message")
    message = data["message"]
    attributes = message.get("attributes") or {}
    try:
        raw = base64.b64decode(message.get("data") or "", validate=True)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise InvalidInput(f"Pub/Sub data is not base64: {exc}") from exc
    return raw, {str(k): str(v) for k, v in attributes.items()}


def run_event(cloud_event: Any, expect: type[Message] | tuple[type[Message], ...], deps: Deps | None = None) -> str:
    """Handle one Pub/Sub delivery; returns the outcome ("done", "acked", "rejected", "dead-letter").

    ``expect`` names the message type(s) this function consumes: several push subscriptions may
    deliver to one function (ingest takes both snapshots-written and articles-accepted).

    Raising makes the function answer 500, so Pub/Sub redelivers with backoff and dead-letters
    after the subscription's max delivery attempts.
    """
    from gleaner import logs

    first = expect[0] if isinstance(expect, tuple) else expect
    with logs.delivery(_stage_of(first), _request_headers()):
        return _run_event(cloud_event, expect, deps)


def _run_event(cloud_event: Any, expect: type[Message] | tuple[type[Message], ...], deps: Deps | None) -> str:
    from gleaner import logs

    try:
        raw, attributes = pubsub_message(cloud_event)
        dead = DEAD_LETTER_ATTRIBUTE in attributes
        expected = expect if isinstance(expect, tuple) else (expect,)
        message = decode(raw)
        if not dead and not isinstance(message, expected):
            raise InvalidInput(f"expected {' or '.join(c.__name__ for c in expected)}, got {type(message).__name__}")
    except InvalidInput as exc:
        # Redelivering a malformed message cannot help: log it for the operator and ack.
        log.error("rejecting malformed event: %s", exc)
        return "rejected"
    logs.label(run_id=getattr(message, "run_id", None), site_domain=getattr(message, "site_domain", None))
    deps = deps if deps is not None else process_deps()
    if dead:
        from gleaner.runtime.deadletters import record_failure

        source = attributes.get(DEAD_LETTER_ATTRIBUTE, "?")
        count = attributes.get("CloudPubSubDeadLetterSourceDeliveryCount", "?")
        record_failure(message, deps, f"dead-lettered by {source} after {count} deliveries")
        log.warning("recorded dead letter %s run=%s from %s", type(message).__name__,
                    getattr(message, "run_id", None), source,
                    extra={"fields": {"event": logs.Event.DEAD_LETTER.value, "message_type": type(message).__name__}})
        return "dead-letter"
    return _dispatch(message, deps)


def _dispatch(message: Message, deps: Deps) -> str:
    """Run the stage; "done" or "acked" (permanent error, logged and recorded on the run). Anything else
    propagates (redeliver)."""
    from gleaner.stages import dispatch

    name, run = type(message).__name__, getattr(message, "run_id", None)
    try:
        dispatch(message, deps)
    except PermanentError as exc:
        log.warning("acknowledging %s run=%s after a permanent error: %s", name, run, exc)
        # Acknowledged means never delivered again: record it on the run as the in-process bus does,
        # or a scrape batch's URLs would stay pending and its run would never finish.
        from gleaner.runtime.deadletters import record_failure

        record_failure(message, deps, f"permanent error: {exc}")
        return "acked"
    except Exception as exc:
        log.warning("%s run=%s failed and will be redelivered: %r", name, run, exc)
        raise
    log.info("handled %s run=%s", name, run)
    return "done"


# -- HTTP ----------------------------------------------------------------------------------------


def _read_body(request: Any, limit: int) -> bytes:
    """The body through the one capped reader of every HTTP surface (:func:`gleaner.serving.web.read_body`).

    Through werkzeug's stream, opened only once the reader decides to read; BodyRefused otherwise."""
    return read_body(request.environ, limit, lambda: request.stream)


def bearer_ok(request: Any, secret: str) -> bool:
    """Constant-time comparison of the Authorization bearer with the configured secret."""
    from gleaner.cloud.callers import bearer_matches

    return bearer_matches(request.headers, secret)


def run_crawl_request(request: Any, deps: Deps | None = None) -> HttpResponse:
    """map's on_http: authenticate, validate, publish to crawl-requests, answer 202 with the run id.

    ``GET ?run_id=…`` answers the run's status and counters (the operator's follow-up).
    """
    from gleaner import logs

    with logs.delivery("map", request.headers):
        return _run_crawl_request(request, deps)


def _run_crawl_request(request: Any, deps: Deps | None) -> HttpResponse:
    from gleaner.cloud.callers import admitted
    from gleaner.settings.config import HttpAuth

    if request.method not in ("POST", "GET"):
        return _json_response({"error": "use POST (or GET ?run_id=…)"}, 405)
    deps = deps if deps is not None else process_deps()
    if not deps.settings.webhook_secret and deps.settings.http_auth is HttpAuth.BEARER:
        log.error("GLEANER_WEBHOOK_SECRET is not set: refusing every HTTP crawl request")
        return _json_response({"error": "the webhook secret is not configured"}, 500)
    caller = admitted(request.headers, deps.settings)
    if caller is None:
        return _json_response({"error": "missing or wrong bearer token"}, 401)
    if request.method == "GET":
        return run_status(request.args.get("run_id", ""), deps)
    try:
        body = _read_body(request, deps.settings.webhook_max_bytes)
        if is_scheduler_call(body, "tick"):
            return run_tick(deps)
        if is_scheduler_call(body, "sweep"):
            return run_sweep(deps)
        if is_scheduler_call(body, "index"):
            return run_index_upkeep(deps)
        message = crawl_request_from(body, request.headers)
    except BodyRefused as exc:
        return _json_response({"error": exc.message}, exc.status)
    except InvalidInput as exc:
        return _json_response({"error": str(exc)}, 400)
    from gleaner import logs
    from gleaner.tenancy import site_for
    from gleaner.urls import canonicalize

    try:
        site = site_for(canonicalize(message.target_url), message.site_domain)
    except InvalidInput as exc:
        return _json_response({"error": str(exc)}, 400)
    try:
        deps.bus.publish(message, ordering_key=site)
    except (RetryableError, ConfigError) as exc:
        log.error("could not accept crawl request %s: %s", message.request_id, exc)
        return _json_response({"error": "could not queue the request; retry"}, 503)
    logs.label(run_id=message.run_id, site_domain=site)
    log.info("accepted crawl request %s from %s (%s)", message.request_id, caller.name, caller.kind)
    _drain_if_local(deps)
    return _json_response({"run_id": message.run_id, "request_id": message.request_id,
                           "site_domain": site}, 202)


def run_status(run_id: str, deps: Deps) -> HttpResponse:
    """A run's status and counters: 200, 400 for a malformed id, 404 for an unknown one."""
    try:
        uuid.UUID(run_id)
    except ValueError:
        return _json_response({"error": "run_id must be a run's UUID"}, 400)
    from gleaner import tenancy

    # Only the operator's credentials (the shared bearer or the invoker identity) reach this: it
    # answers for any tenant's run, the operator's deliberate cross-tenant view.
    with tenancy.all_tenants():
        summary = deps.metadata.run_summary(run_id)
    if summary is None:
        return _json_response({"error": f"no run {run_id}"}, 404)
    return _json_response(summary, 200)


def is_scheduler_call(body: bytes, job: str) -> bool:
    """Cloud Scheduler's ``job`` (tick, sweep, index): a body of exactly ``{"<job>": true}``."""
    try:
        data = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError):
        return False
    return data == {job: True}


def run_sweep(deps: Deps) -> HttpResponse:
    """Settle every run idle past ``GLEANER_SWEEP_IDLE_SECONDS`` (:func:`gleaner.runtime.runcontrol.sweep`); 200."""
    from gleaner import tenancy
    from gleaner.runtime.runcontrol import sweep
    from gleaner.stages.upkeep import upkeep

    try:
        with tenancy.all_tenants():  # the sweep looks after every tenant's runs
            settled = sweep(deps.metadata, deps.settings.sweep_idle_seconds)
        kept = upkeep(deps)  # retention: bodies of settled runs, old versions, expired artefacts
    except RetryableError as exc:
        log.error("sweep failed: %s", exc)
        return _json_response({"error": "could not sweep; retry"}, 503)
    return _json_response({"swept": [s.to_dict() for s in settled], "upkeep": kept.to_dict()}, 200)


def run_index_upkeep(deps: Deps) -> HttpResponse:
    """The vector graph's upkeep: fresh vectors merged unless a run is active
    (:func:`gleaner.retrieval.upkeep.merge_if_idle`); 200 with what moved."""
    import sqlalchemy as sa

    from gleaner.retrieval.upkeep import CLOUD_BUDGET, merge_if_idle

    try:
        report = merge_if_idle(deps.engine, budget=CLOUD_BUDGET)
    except sa.exc.SQLAlchemyError as exc:
        log.error("index upkeep failed: %s", exc)
        return _json_response({"error": "could not merge fresh vectors; retry"}, 503)
    return _json_response({"merged": report.merged, "way": str(report.way),
                           "seconds": round(report.seconds, 2)}, 200)


def run_tick(deps: Deps) -> HttpResponse:
    """Start every due site's crawl (:func:`gleaner.operator.schedule.tick`); 202 with what started."""
    from gleaner.operator.schedule import tick

    try:
        report = tick(deps)
    except (RetryableError, ConfigError) as exc:
        log.error("tick failed: %s", exc)
        return _json_response({"error": "could not start the due crawls; retry"}, 503)
    _drain_if_local(deps)
    return _json_response(report.to_dict(), 202)


def _drain_if_local(deps: Deps) -> None:
    """Under plain functions-framework with the in-process bus, run the crawl here: nothing else would."""
    bus = deps.local_bus
    if bus is not None:
        bus.drain()


def run_webhook(request: Any, deps: Deps | None = None) -> HttpResponse:
    """ingest's on_http: the feed-poller webhook and reference retrieval (:mod:`gleaner.serving.webhook`)."""
    from gleaner import logs

    with logs.delivery("ingest", request.headers):
        return _run_webhook(request, deps)


def _run_webhook(request: Any, deps: Deps | None) -> HttpResponse:
    from gleaner.serving.web import query_of
    from gleaner.serving.webhook import WebhookRequest, handle

    deps = deps if deps is not None else process_deps()
    cap = deps.settings.webhook_max_bytes
    environ = request.environ
    reading: list[bool] = []

    def body() -> bytes:
        reading.append(True)
        return _read_body(request, cap)

    status, answer = handle(WebhookRequest(
        method=request.method, path=request.path, headers={k.lower(): v for k, v in request.headers.items()},
        query=query_of(request.query_string), read_body=body,
    ), deps)
    if not reading or status in (400, 413):
        # functions-framework reads the whole body into memory after the answer (read_request). A body
        # this handler did not read (unauthenticated, refused) must not be: the framework's read finds
        # none, and the server discards what the caller still sends.
        environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(), "0"
    if status == 202:
        _drain_if_local(deps)  # land what was accepted: nothing else would under plain functions-framework
    return _json_response(answer, status)


def run_backoffice(request: Any, deps: Deps | None = None) -> Any:
    """The backoffice function's on_http: ``/v1/`` and ``/ui/`` behind IAM (its own invokers), then the
    operator bearer or a site token (:mod:`gleaner.backoffice.function`). Not a stage: it reads and steers."""
    from gleaner import logs
    from gleaner.backoffice.function import answer

    with logs.delivery("backoffice", request.headers):
        return answer(request, deps if deps is not None else process_deps())
