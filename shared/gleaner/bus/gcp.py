"""The bus on Google Cloud: Pub/Sub for ``publish`` and ``announce``, Cloud Tasks for ``enqueue``
and ``enqueue_delivery`` (the notify queue).

- ``publish`` sends the encoded message to the message's topic with batching on,
  ordering key = site, and waits for the publish future: the caller acknowledges
  its own trigger only after the next hop is durable (FACTS.md: write the body,
  commit the metadata, then publish/ack).
- ``enqueue`` creates one HTTP task on the scrape queue, named
  ``{run_id}-{batch_no}``, with an OIDC token for the scrape function's service
  account; a name already used answers AlreadyExists, which means "already
  scheduled" (False), so a redelivered sample message cannot schedule twice.
  With ``GLEANER_TASKS_BACKEND=pubsub`` (emulator mode: Cloud Tasks has no
  emulator) the batch is published to the ``scrape`` topic instead, whose push
  subscription delivers the same body, unwrapped, to the same ``on_http``.
- ``defer`` is ``enqueue`` with a Cloud Tasks ``schedule_time``. Pub/Sub has no delayed delivery,
  so in emulator mode a timer of this process publishes the batch when it is due: not durable,
  which only the emulator accepts. ``cancel`` deletes such a task (Cloud Tasks ``DeleteTask``; in
  emulator mode it stops the timer, when this process set it); one that is gone already is no error.
- ``enqueue_delivery`` creates a task on the notify queue for the notify function. In emulator
  mode, when ``GLEANER_NOTIFY_TASK_URL`` names the notify function, the task is published to the
  ``notify`` topic, whose push subscription delivers it unwrapped to that function.

Clients are created on first use (never at import), honour
``PUBSUB_EMULATOR_HOST`` from the settings, and can be injected (tests point the
Cloud Tasks client's REST transport at a local recorder). Google exceptions are
translated here into Gleaner's error tree.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from gleaner.errors import ConfigError, InvalidInput, RetryableError
from gleaner.messages import DeliveryTask, Message, ScrapeBatch, encode
from gleaner.settings.config import Settings

if TYPE_CHECKING:
    from gleaner.changes.events import ChangeEvent

log = logging.getLogger(__name__)

# Pub/Sub batches up to this many messages / this long before sending: stages publish one message
# per hop, but many threads of one instance (concurrency > 1) share the batch.
BATCH_MAX_MESSAGES = 100
BATCH_MAX_LATENCY = 0.01
# Scrape tasks fetch up to 100 pages politely; Cloud Tasks allows up to 30 minutes per dispatch.
TASK_DISPATCH_DEADLINE_SECONDS = 1800


class GcpBus:
    def __init__(self, settings: Settings, *, publisher: Any = None, tasks_client: Any = None) -> None:
        if not settings.project:
            raise ConfigError("GLEANER_BUS=gcp needs GOOGLE_CLOUD_PROJECT")
        self.settings = settings
        self._publisher = publisher
        self._tasks = tasks_client
        self._lock = threading.Lock()
        # Emulator mode's deferred batches not yet published, by task name (cancel stops them).
        self._timers: dict[str, threading.Timer] = {}

    # -- clients --------------------------------------------------------------------------------

    @property
    def publisher(self) -> Any:
        with self._lock:
            if self._publisher is None:
                self._publisher = _new_publisher(self.settings)
            return self._publisher

    @property
    def tasks(self) -> Any:
        with self._lock:
            if self._tasks is None:
                from google.cloud import tasks_v2

                self._tasks = tasks_v2.CloudTasksClient()
            return self._tasks

    def topic_path(self, topic: str) -> str:
        return f"projects/{self.settings.project}/topics/{topic}"

    def queue_path(self) -> str:
        return f"projects/{self.settings.project}/locations/{self.settings.region}/queues/{self.settings.tasks_queue}"

    # -- the port -------------------------------------------------------------------------------

    def publish(self, message: Message, *, ordering_key: str | None = None) -> None:
        from google.api_core import exceptions as gexc
        from google.cloud.pubsub_v1.publisher.exceptions import PublishToPausedOrderingKeyException

        topic = self.topic_path(message.topic)
        key = ordering_key or ""
        try:
            future = self.publisher.publish(topic, encode(message), ordering_key=key,
                                            type=type(message).__name__)
            future.result(timeout=self.settings.publish_timeout)
        except (gexc.GoogleAPIError, PublishToPausedOrderingKeyException, TimeoutError, OSError) as exc:
            if key:
                # An ordered publish that failed pauses its key until resumed; the redelivered
                # handler publishes again, so resume now.
                self.publisher.resume_publish(topic, key)
            if isinstance(exc, gexc.NotFound):
                raise ConfigError(f"Pub/Sub topic {topic} does not exist") from exc
            raise RetryableError(f"publish to {topic} failed: {exc}") from exc

    def enqueue(self, batch: ScrapeBatch) -> bool:
        if len(batch.document_ids) > self.settings.scrape_batch_size:
            raise InvalidInput(f"a scrape batch holds at most {self.settings.scrape_batch_size} URLs")
        if self.settings.tasks_backend == "pubsub":
            self.publish(batch, ordering_key=batch.site_domain)
            return True
        return self._create_task(batch)

    def defer(self, batch: ScrapeBatch, seconds: float) -> bool:
        if self.settings.tasks_backend == "pubsub":
            timer = threading.Timer(max(0.0, seconds), self._publish_later, (batch,))
            timer.daemon = True
            with self._lock:
                self._timers[batch.task_name] = timer
            timer.start()
            return True
        at = datetime.now(UTC) + timedelta(seconds=max(0.0, seconds))
        return self._create_named_task(build_task_request(self.settings, self.queue_path(), batch, at=at),
                                       batch.task_name)

    def cancel(self, task_name: str) -> bool:
        from google.api_core import exceptions as gexc

        if self.settings.tasks_backend == "pubsub":
            with self._lock:  # whoever takes the timer out first, its run or this, decides
                timer = self._timers.pop(task_name, None)
            if timer is None:
                return False
            timer.cancel()
            return True
        try:
            self.tasks.delete_task(name=f"{self.queue_path()}/tasks/{task_name}")
        except gexc.NotFound:  # it ran (or is running), or was deleted before: nothing left to stop
            return False
        except gexc.GoogleAPIError as exc:
            raise RetryableError(f"cannot delete task {task_name}: {exc}") from exc
        return True

    def _publish_later(self, batch: ScrapeBatch) -> None:
        with self._lock:
            if self._timers.pop(batch.task_name, None) is None:
                return  # cancelled as it fell due
        try:
            self.publish(batch, ordering_key=batch.site_domain)
        except Exception:  # a timer thread has no caller to tell: say so where the operator looks
            log.exception("could not publish deferred batch %s", batch.task_name)

    def announce(self, event: ChangeEvent) -> None:
        """The event's JSON is the message (not the stages' envelope): downstream consumers read it as is."""
        from google.api_core import exceptions as gexc

        from gleaner.changes.events import TOPIC

        topic = self.topic_path(TOPIC)
        data = json.dumps(event.to_dict(), separators=(",", ":"), sort_keys=True).encode("utf-8")
        try:
            future = self.publisher.publish(topic, data, ordering_key=event.site_domain, type=event.type,
                                            site_domain=event.site_domain, event_id=event.event_id)
            future.result(timeout=self.settings.publish_timeout)
        except gexc.NotFound as exc:
            raise ConfigError(f"Pub/Sub topic {topic} does not exist") from exc
        except (gexc.GoogleAPIError, TimeoutError, OSError) as exc:
            self.publisher.resume_publish(topic, event.site_domain)
            raise RetryableError(f"publish to {topic} failed: {exc}") from exc

    def enqueue_delivery(self, delivery_id: str, not_before: datetime | None = None) -> bool:
        """One task on the notify queue per delivery, named after it; Cloud Tasks retries with backoff.
        A digest's task is scheduled for its period's end (``not_before``).

        In emulator mode (no Cloud Tasks) deliveries stay in the database queue for ``gleaner deliver``.
        """
        task = DeliveryTask(delivery_id=delivery_id)
        if self.settings.tasks_backend == "pubsub":
            if not self.settings.notify_task_url:  # no notify function in this emulator stack
                return False
            if not_before is not None and not_before > datetime.now(UTC):
                return False  # Pub/Sub cannot hold a message back: a digest waits in the database queue
            self.publish(task)
            return True
        if notify_task_url(self.settings) is None:
            # The scrape function knows no URL of its own: the next map or snapshot schedules these.
            return False
        self._create_named_task(build_delivery_request(self.settings, self.notify_queue_path(), task, not_before),
                                task.task_name)
        return True  # created now or before: scheduled either way

    def notify_queue_path(self) -> str:
        return f"projects/{self.settings.project}/locations/{self.settings.region}/queues/{self.settings.notify_queue}"

    def _create_task(self, batch: ScrapeBatch) -> bool:
        return self._create_named_task(build_task_request(self.settings, self.queue_path(), batch), batch.task_name)

    def _create_named_task(self, request: dict[str, Any], name: str) -> bool:
        """Create a named task; False if that name was already used (it is scheduled, not twice)."""
        from google.api_core import exceptions as gexc

        try:
            self.tasks.create_task(request=request)
        except gexc.Aborted as exc:  # also HTTP 409, but transient: try again
            raise RetryableError(f"cannot create task {name}: {exc}") from exc
        except gexc.Conflict:
            # gRPC answers AlreadyExists; the REST transport maps the same 409 to Conflict.
            log.info("task %s already exists; not scheduling it twice", name)
            return False
        except gexc.InvalidArgument as exc:
            raise InvalidInput(f"Cloud Tasks refused task {name}: {exc}") from exc
        except gexc.GoogleAPIError as exc:
            raise RetryableError(f"cannot create task {name}: {exc}") from exc
        return True

    def close(self) -> None:
        if self._publisher is not None:
            self._publisher.stop()


def build_task_request(settings: Settings, queue_path: str, batch: ScrapeBatch, *,
                       at: datetime | None = None) -> dict[str, Any]:
    """The CreateTask request: a named HTTP POST of the encoded batch to the scrape function (at ``at``)."""
    if not settings.scrape_url:
        raise ConfigError("Cloud Tasks needs GLEANER_SCRAPE_URL (the scrape function's URL)")
    http_request: dict[str, Any] = {
        "http_method": "POST",
        "url": settings.scrape_url,
        "headers": {"Content-Type": "application/json"},
        "body": encode(batch),
    }
    if settings.tasks_service_account:
        # The scrape function only admits callers holding run.invoker: Cloud Tasks proves it is this
        # service account with an OIDC token whose audience is the function's URL.
        http_request["oidc_token"] = {"service_account_email": settings.tasks_service_account,
                                      "audience": settings.scrape_url}
    task: dict[str, Any] = {
        "name": f"{queue_path}/tasks/{batch.task_name}",
        "http_request": http_request,
        "dispatch_deadline": {"seconds": TASK_DISPATCH_DEADLINE_SECONDS},
    }
    if at is not None:
        task["schedule_time"] = {"seconds": int(at.timestamp()), "nanos": at.microsecond * 1000}
    return {"parent": queue_path, "task": task}


def notify_task_url(settings: Settings) -> str | None:
    """Where delivery tasks go: GLEANER_NOTIFY_TASK_URL, else the scrape function's /notify/deliver."""
    if settings.notify_task_url:
        return settings.notify_task_url
    if settings.scrape_url:
        return settings.scrape_url.rstrip("/") + "/notify/deliver"
    return None


def service_audience(url: str) -> str:
    """The audience Cloud Run accepts for a URL of one of its services: scheme and host, no path."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def build_delivery_request(settings: Settings, queue_path: str, task: DeliveryTask,
                           not_before: datetime | None = None) -> dict[str, Any]:
    """The CreateTask request for one webhook delivery: POST the encoded task to the delivery handler
    (not before ``not_before``, a digest's period end)."""
    url = notify_task_url(settings)
    if url is None:
        raise ConfigError("webhook deliveries on Cloud Tasks need GLEANER_NOTIFY_TASK_URL or GLEANER_SCRAPE_URL")
    http_request: dict[str, Any] = {
        "http_method": "POST",
        "url": url,
        "headers": {"Content-Type": "application/json"},
        "body": encode(task),
    }
    if settings.tasks_service_account:
        # Cloud Run checks the token's audience against the service's URL (no path): the URL with
        # /notify/deliver in it would be refused with 401 on every attempt.
        http_request["oidc_token"] = {"service_account_email": settings.tasks_service_account,
                                      "audience": service_audience(url)}
    body: dict[str, Any] = {"name": f"{queue_path}/tasks/{task.task_name}", "http_request": http_request}
    if not_before is not None:
        body["schedule_time"] = not_before
    return {"parent": queue_path, "task": body}


def _new_publisher(settings: Settings) -> Any:
    import google.cloud.pubsub_v1 as pubsub_v1

    batch = pubsub_v1.types.BatchSettings(max_messages=BATCH_MAX_MESSAGES, max_latency=BATCH_MAX_LATENCY)
    options = pubsub_v1.types.PublisherOptions(enable_message_ordering=True)
    kwargs: dict[str, Any] = {}
    if settings.pubsub_emulator_host:
        # Honour the emulator from the settings, not only from os.environ: an insecure channel.
        import grpc
        from google.pubsub_v1.services.publisher.transports.grpc import PublisherGrpcTransport

        channel = grpc.insecure_channel(settings.pubsub_emulator_host)
        kwargs["transport"] = PublisherGrpcTransport(channel=channel)
    return pubsub_v1.PublisherClient(batch_settings=batch, publisher_options=options, **kwargs)
