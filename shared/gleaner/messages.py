"""Typed messages for every hop between stages, and the one codec for them.

Messages carry ids and references, never bodies (bodies live in blobs; Pub/Sub
caps a message at 10 MB and Cloud Tasks a task at 1 MB). Each message names its
topic; the codec wraps it in ``{"type", "v", "data"}`` JSON so one decoder serves
Pub/Sub envelopes, task bodies and the in-process bus. Idempotency keys derive
from business identity (run id, document id, content hash), never message ids.

::

    CrawlRequested --map--> CrawlMapped --sample--> ScrapeBatch (task) --scrape-->
        PagesFetched --snapshot--> SnapshotsWritten --ingest--> (downstream)
    ArticlesAccepted (webhook) --ingest--> lands feed articles as reference items
"""

from __future__ import annotations

import json
import uuid
from dataclasses import MISSING, dataclass, fields, replace
from typing import Any, ClassVar, TypeVar

from gleaner.errors import InvalidInput
from gleaner.tenancy import validate_site_domain

SCHEMA_VERSION = 1
# Namespace for ids minted from business identity (run ids from request ids, ...).
GLEANER_NS = uuid.UUID("6b3f7c1e-9d4a-5e2b-8f10-2c7a9e4d1b53")

T = TypeVar("T", bound="Message")


def run_id_for(request_id: str) -> str:
    """A redelivered crawl request maps to the same run."""
    return str(uuid.uuid5(GLEANER_NS, "run:" + request_id))


@dataclass(frozen=True, slots=True)
class Message:
    topic: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        if not isinstance(data, dict):
            raise InvalidInput(f"{cls.__name__}: expected an object, got {type(data).__name__}")
        names = {f.name: f for f in fields(cls)}
        missing = [
            n for n, f in names.items() if n not in data and f.default is MISSING and f.default_factory is MISSING
        ]
        if missing:
            raise InvalidInput(f"{cls.__name__}: missing fields {missing}")
        kwargs: dict[str, Any] = {}
        for name in names:
            if name in data:
                kwargs[name] = _freeze(data[name])
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"{cls.__name__}: {exc}") from exc


_PRIMITIVES = (str, int, float, bool, type(None))
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _plain(value: Any) -> Any:
    """``dataclasses.asdict`` without its deep copy of every value: a message holds primitives, tuples
    and nested frozen messages, so copying them changes nothing (a batch's pages are a hundred each time
    the in-process bus round-trips one)."""
    if type(value) in _PRIMITIVES:
        return value
    if isinstance(value, (tuple, list)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    names = _FIELD_NAMES.get(type(value))
    if names is None:
        if not hasattr(value, "__dataclass_fields__"):
            return value  # any other value goes in as it is (json says whether it can)
        names = _FIELD_NAMES[type(value)] = tuple(f.name for f in fields(value))
    return {name: _plain(getattr(value, name)) for name in names}


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


@dataclass(frozen=True, slots=True)
class CrawlRequested(Message):
    """Start a crawl. ``request_id`` is the idempotency key: run_id = uuid5(request_id)."""

    topic: ClassVar[str] = "crawl-requests"
    request_id: str
    target_url: str
    site_domain: str | None = None
    limit: int | None = None
    max_depth: int | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    feeds: tuple[str, ...] = ()
    mode: str = "website_mapping"
    triggered_by: str = "api"
    # A site's own run budget (gleaner sites add --max-*); None: the global GLEANER_RUN_MAX_* settings.
    max_requests: int | None = None
    max_bytes: int | None = None
    max_seconds: float | None = None
    # Skip URLs whose sitemap <lastmod> is not after their last fetch (scheduled runs of `auto` sites).
    honour_lastmod: bool = False
    # never | auto | always (gleaner.render.modes); None: the site's, else never.
    render: str | None = None
    # Politeness the caller asked for (`gleaner crawl --delay/--concurrency`); kept with the run, so a
    # resume fetches as the original crawl did. None: the settings' (and the site's) own.
    delay: float | None = None
    concurrency: int | None = None

    def __post_init__(self) -> None:
        # The one message a caller shapes: its tenant key can never name a reserved tenant.
        if self.site_domain is not None:
            validate_site_domain(self.site_domain)
        if self.render is not None:
            from gleaner.render.modes import parse_render_mode

            parse_render_mode(self.render)

    @property
    def run_id(self) -> str:
        return run_id_for(self.request_id)


@dataclass(frozen=True, slots=True)
class CrawlMapped(Message):
    topic: ClassVar[str] = "crawl-mapped"
    run_id: str
    site_domain: str

    def __post_init__(self) -> None:
        validate_site_domain(self.site_domain, allow_reserved=True)  # published by Gleaner's own stages


@dataclass(frozen=True, slots=True)
class ScrapeBatch(Message):
    """One Cloud Tasks task: at most 100 document ids of one run, named run id + batch number.

    ``part`` counts continuations: a batch that reached its soft deadline hands the URLs it did not
    start to part + 1 of the same batch, under its own deterministic name. ``deferrals`` counts the
    times the batch was handed back to the queue because its site's batches were all taken
    (:mod:`gleaner.cloud.siteleases`): each is a new task under its own name, so none is scheduled twice.
    ``queued`` marks such a batch as written down among its site's waiters: a holder that finishes
    sends a ``woken`` copy at once (its name ends ``-w``), and whichever copy arrives first runs it.
    """

    topic: ClassVar[str] = "scrape"
    run_id: str
    site_domain: str
    batch_no: int
    document_ids: tuple[str, ...] = ()
    part: int = 0
    deferrals: int = 0
    queued: bool = False
    woken: bool = False

    def __post_init__(self) -> None:
        validate_site_domain(self.site_domain, allow_reserved=True)  # published by Gleaner's own stages

    @property
    def task_name(self) -> str:
        return (f"{self.run_id}-{self.batch_no}" + (f"-p{self.part}" if self.part else "")
                + (f"-d{self.deferrals}" if self.deferrals else "") + ("-w" if self.woken else ""))


@dataclass(frozen=True, slots=True)
class FetchedPage:
    """What scrape hands snapshot for one page: hashes and run-scoped blob keys, no bodies."""

    document_id: str
    content_hash: str
    raw_hash: str
    content_key: str | None
    raw_key: str | None
    fetch_status: int
    fetch_time_ms: int
    byte_size: int
    extractor: str = ""
    source_blake3: str | None = None  # BLAKE3 of the bytes as fetched; None from an older sender
    # A document (a PDF): its original bytes, run-scoped, and its type; snapshot keeps them beside content.md.
    original_key: str | None = None
    mime_type: str | None = None
    render_mode: str = "plain_fetch"  # gleaner.render.modes.RenderedBy: browser when its DOM was rendered

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FetchedPage:
        if not isinstance(data, dict):
            raise InvalidInput(f"FetchedPage: expected an object, got {type(data).__name__}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise InvalidInput(f"FetchedPage: {exc}") from exc


@dataclass(frozen=True, slots=True)
class PagesFetched(Message):
    topic: ClassVar[str] = "pages-fetched"
    run_id: str
    site_domain: str
    batch_no: int
    pages: tuple[FetchedPage, ...] = ()

    def __post_init__(self) -> None:
        validate_site_domain(self.site_domain, allow_reserved=True)  # published by Gleaner's own stages

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PagesFetched:
        # Two-argument super: slots=True recreates the class, which breaks the zero-argument form.
        base = super(PagesFetched, cls).from_dict({**data, "pages": ()})
        raw_pages = data.get("pages") or []
        if not isinstance(raw_pages, list | tuple):
            raise InvalidInput("PagesFetched.pages must be a list")
        pages = tuple(p if isinstance(p, FetchedPage) else FetchedPage.from_dict(p) for p in raw_pages)
        return replace(base, pages=pages)


@dataclass(frozen=True, slots=True)
class SnapshotsWritten(Message):
    topic: ClassVar[str] = "snapshots-written"
    run_id: str | None
    site_domain: str
    snapshot_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        validate_site_domain(self.site_domain, allow_reserved=True)  # published by Gleaner's own stages


@dataclass(frozen=True, slots=True)
class ArticlesAccepted(Message):
    """The webhook recorded ledger rows (or got a walk nudge): land passed articles not yet landed.

    ``article_ids`` narrows the landing to those rows' URLs; ``walk`` lands every pending URL;
    ``full_reprocess`` re-fetches every passed URL (the changed-content route, seed D-4). The ledger,
    not the message, says what is pending, so a redelivery after landing finds nothing to do.
    """

    topic: ClassVar[str] = "articles-accepted"
    article_ids: tuple[str, ...] = ()
    walk: bool = False
    full_reprocess: bool = False


@dataclass(frozen=True, slots=True)
class DeliveryTask(Message):
    """One Cloud Tasks task: make one attempt of one webhook delivery (gleaner.changes.delivery)."""

    topic: ClassVar[str] = "notify"
    delivery_id: str

    @property
    def task_name(self) -> str:
        return f"notify-{self.delivery_id}"


MESSAGE_TYPES: dict[str, type[Message]] = {
    cls.__name__: cls
    for cls in (CrawlRequested, CrawlMapped, ScrapeBatch, PagesFetched, SnapshotsWritten, ArticlesAccepted,
                DeliveryTask)
}
TOPICS: dict[str, type[Message]] = {cls.topic: cls for cls in MESSAGE_TYPES.values()}


def encode(message: Message) -> bytes:
    """One wire format for Pub/Sub data, task bodies and the local bus."""
    envelope = {"type": type(message).__name__, "v": SCHEMA_VERSION, "data": message.to_dict()}
    return json.dumps(envelope, separators=(",", ":"), sort_keys=True).encode("utf-8")


def decode(raw: bytes | str, expect: type[T] | None = None) -> Message:
    """Decode an envelope; anything malformed raises InvalidInput (permanent: ack, never retry)."""
    try:
        envelope = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"message is not JSON: {exc}") from exc
    if not isinstance(envelope, dict) or not isinstance(envelope.get("data"), dict):
        raise InvalidInput("message envelope must be an object with a 'data' object")
    version = envelope.get("v")
    if version != SCHEMA_VERSION:
        raise InvalidInput(f"unsupported message schema version {version!r}")
    cls = MESSAGE_TYPES.get(str(envelope.get("type")))
    if cls is None:
        raise InvalidInput(f"unknown message type {envelope.get('type')!r}")
    if expect is not None and cls is not expect:
        raise InvalidInput(f"expected {expect.__name__}, got {cls.__name__}")
    return cls.from_dict(envelope["data"])
