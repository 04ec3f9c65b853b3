"""The composition root: builds every adapter from one Settings object, lazily, once.

Stages receive a :class:`Deps` and never construct clients themselves. The CLI
and each Cloud Function build one ``Deps`` per process (functions keep it across
invocations); tests build their own from their own environment mapping.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from gleaner.observe import NoObserver, RunObserver
from gleaner.runtime import fetchdeps
from gleaner.settings.config import Settings

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from gleaner.bus.local import LocalBus
    from gleaner.bus.port import Bus
    from gleaner.decide.language import LanguageModel
    from gleaner.decide.port import Decider
    from gleaner.extract.pool import ExtractPool
    from gleaner.fetch.fetcher import Fetcher
    from gleaner.fetch.robots import RobotsRules
    from gleaner.provenance.handover import CanonicalHandover
    from gleaner.render.browser import BrowserRenderer
    from gleaner.render.remote import RemoteRenderer
    from gleaner.retrieval.embedder import Embedder
    from gleaner.retrieval.index import SearchIndex
    from gleaner.store.access.tokens import TokenStore
    from gleaner.store.backends.blobs import BlobStore
    from gleaner.store.browse import BrowseStore
    from gleaner.store.documents.blocklist import Blocklist
    from gleaner.store.documents.texts import TextStore
    from gleaner.store.feeds.references import ReferenceStore
    from gleaner.store.metadata import MetadataStore
    from gleaner.store.provenance import ProvenanceStore


T = TypeVar("T")

# Canonical texts kept between scrape and ingest in one process: a few scrape batches' worth
# (100 pages of ~16 KB each); the oldest go first, and ingest recomputes what is gone.
CANONICAL_HANDOVER_BYTES = 32 * 2**20


class _built_once(Generic[T]):
    """functools.cached_property, but built under the Deps lock: a function serving concurrent
    requests must not build two engines or two Pub/Sub publishers on its first requests.
    (cached_property locked until Python 3.11 and no longer does from 3.12 on.)"""

    def __init__(self, build: Callable[[Any], T]) -> None:
        self.build = build
        self.name = build.__name__
        self.__doc__ = build.__doc__

    def __get__(self, deps: Any, owner: type | None = None) -> T:
        if deps is None:
            return self  # type: ignore[return-value]  # class access, as cached_property does
        try:
            return deps.__dict__[self.name]
        except KeyError:
            pass
        with deps._lock:  # re-entrant: building metadata builds the engine
            if self.name not in deps.__dict__:
                deps.__dict__[self.name] = self.build(deps)
            return deps.__dict__[self.name]


@dataclass
class Deps:
    settings: Settings
    # Optional injections (tests, the local runner); anything left None is built from settings.
    bus_override: Bus | None = None
    fetcher_factory: Callable[[Settings], Fetcher] | None = None
    engine_override: Engine | None = None
    blobs_override: BlobStore | None = None
    # The local process driving the runs this Deps creates (``host:pid:start``; run control's
    # liveness check); None in the cloud, where a run's heartbeat is all that tells.
    worker: str | None = None
    decider_override: Decider | None = None
    embedder_override: Embedder | None = None
    # Told of URLs found and pages fetched as they happen (the CLI's progress); nothing by default.
    observer: RunObserver = field(default_factory=NoObserver)
    # A browser shared by many Deps (the tests' one warm Chromium); None: this Deps launches its own on demand.
    renderer_override: BrowserRenderer | RemoteRenderer | None = None
    # Answers lookups of notification targets instead of DNS (tests: a name that resolves to a chosen address).
    resolver_override: Callable[[str, int], list[str]] | None = None
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _robots_by_run: dict[str, MutableMapping[str, RobotsRules]] = field(default_factory=dict, repr=False)
    _options_by_run: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    @_built_once
    def engine(self) -> Engine:
        if self.engine_override is not None:
            from gleaner.store.backends.dberrors import guard_engine

            return guard_engine(self.engine_override, self.settings.database_wait_seconds)
        from gleaner.store.backends import db

        engine = db.create_engine(self.settings)
        if self.settings.auto_migrate:
            db.ensure_schema(engine)
        else:
            db.require_schema(engine)
        return engine

    @_built_once
    def metadata(self) -> MetadataStore:
        from gleaner.store.metadata import MetadataStore

        return MetadataStore(self.engine)

    @_built_once
    def references(self) -> ReferenceStore:
        from gleaner.store.feeds.references import ReferenceStore

        return ReferenceStore(self.engine)

    @_built_once
    def provenance(self) -> ProvenanceStore:
        """Citations, conflicts, erasure and retention."""
        from gleaner.store.provenance import ProvenanceStore

        return ProvenanceStore(self.engine)

    @_built_once
    def blocklist(self) -> Blocklist:
        """Erased content, checked before a crawl, a landing or ingest stores anything."""
        from gleaner.store.documents.blocklist import Blocklist
        from gleaner.store.documents.erasurekey import erasure_secret

        secret: list[bytes] = []

        def load() -> bytes:  # read (or made) only when a digest is needed
            if not secret:
                secret.append(erasure_secret(self.settings))
            return secret[0]

        return Blocklist(self.provenance, load)

    @_built_once
    def browse(self) -> BrowseStore:
        """The back office's paginated reads."""
        from gleaner.store.browse import BrowseStore

        return BrowseStore(self.engine)

    @_built_once
    def tokens(self) -> TokenStore:
        """Bearer tokens of HTTP callers (``gleaner tokens``, the webhook's caller check)."""
        from gleaner.store.access.tokens import TokenStore

        return TokenStore(self.engine)

    @_built_once
    def texts(self) -> TextStore:
        from gleaner.store.documents.texts import TextStore

        return TextStore(self.engine)

    @_built_once
    def search_index(self) -> SearchIndex:
        """Chunks, embeddings and which documents are searchable (gleaner.retrieval)."""
        from gleaner.retrieval.index import SearchIndex
        from gleaner.retrieval.prepare import InProcessPreparer, PooledPreparer

        # New texts are chunked and embedded beside the extraction processes while they run, with the
        # model this process would load (retrieval/prepare.py).
        preparer = PooledPreparer(lambda: self.extract_pool, self._offloaded_model(), self.settings.model_cache_dir,
                                  InProcessPreparer(self.inline_embedder))
        return SearchIndex(self.engine, preparer=preparer)

    @property
    def embedder(self) -> Embedder:
        """The process's one embedding model, loaded on first use and shared by every Deps."""
        if self.embedder_override is not None:
            return self.embedder_override
        from gleaner.retrieval.embedder import EmbedModel, default_embedder

        return default_embedder(EmbedModel(self.settings.embed_model), self.settings.model_cache_dir)

    @property
    def reranker(self) -> Embedder | None:
        """The transformer search looks at its first pages again with (GLEANER_RERANK=minilm), else None."""
        if self.settings.rerank != "minilm":
            return None
        from gleaner.retrieval.embedder import EmbedModel, default_embedder

        # A question's few passages on every core the machine has, up to four: a search waits for them.
        return default_embedder(EmbedModel.MINILM, self.settings.model_cache_dir, threads=min(4, os.cpu_count() or 1))

    def inline_embedder(self) -> Embedder | None:
        """The model when it is cheap enough to embed inside ingest's transaction and crawls embed
        (GLEANER_EMBED_AFTER_CRAWL); None otherwise, and where the model's packages are not
        installed (the Cloud Functions: `gleaner index` embeds there)."""
        from gleaner.retrieval.embedder import EmbedderUnavailable

        if not self.settings.embed_after_crawl:
            return None
        try:
            embedder = self.embedder
        except EmbedderUnavailable as exc:
            log.debug("no embedding at ingest: %s", exc)
            return None
        return embedder if getattr(embedder, "inline", False) else None

    @_built_once
    def canonical_handover(self) -> CanonicalHandover:
        """Scrape leaves the extraction processes' canonical texts here for ingest, when ingest runs
        in this process (the in-process bus); elsewhere it keeps nothing (ingest recomputes)."""
        from gleaner.bus.local import LocalBus
        from gleaner.provenance.handover import CanonicalHandover

        bus = self.bus_override
        in_process = isinstance(bus, LocalBus) if bus is not None else self.settings.bus == "local"
        return CanonicalHandover(CANONICAL_HANDOVER_BYTES if in_process else 0)

    @_built_once
    def local_bus(self) -> LocalBus | None:
        """The in-process bus with every stage subscribed, when this process runs the stages itself
        (the CLI, ``gleaner serve``, a function under plain functions-framework); None on Pub/Sub.

        Callers that must drive the stages ask for this instead of checking the bus's type.
        """
        from gleaner.bus.local import LocalBus

        bus = self.bus
        if not isinstance(bus, LocalBus):
            return None
        if not bus.handlers:
            from gleaner.stages import wire

            wire(bus, self)
        return bus

    @_built_once
    def blobs(self) -> BlobStore:
        if self.blobs_override is not None:
            return self.blobs_override
        from gleaner.store.backends.blobs import open_blob_store

        return open_blob_store(self.settings)

    @_built_once
    def bus(self) -> Bus:
        if self.bus_override is not None:
            return self.bus_override
        if self.settings.bus == "gcp":
            from gleaner.bus.gcp import GcpBus

            return GcpBus(self.settings)
        from gleaner.bus.local import LocalBus

        return LocalBus()

    @_built_once
    def decider(self) -> Decider:
        if self.decider_override is not None:
            return self.decider_override
        from gleaner.decide.rules import RuleDecider

        if self.settings.llm_provider == "none":
            return RuleDecider()
        from gleaner.decide.providers import llm_decider

        return llm_decider(self.settings, self.engine, RuleDecider())  # the rules speak first and stand in

    @_built_once
    def language_model(self) -> LanguageModel | None:
        """The configured language model (the contradiction detector's judge), or None: none is configured,
        or its provider cannot be built here (logged; the rules judge stands in, the ingest goes on)."""
        if self.settings.llm_provider == "none":
            return None
        from gleaner.decide.language import LanguageModel
        from gleaner.decide.providers import provider_of
        from gleaner.errors import ConfigError

        try:
            return LanguageModel(provider_of(self.settings))
        except ConfigError as exc:
            log.warning("no language model for the contradiction judge: %s", exc)
            return None

    @_built_once
    def extract_pool(self) -> ExtractPool:
        from gleaner.extract.pool import ExtractPool

        pool = ExtractPool(self.settings.extract_workers)
        model = self._offloaded_model()
        if model is not None:  # ingest's chunks and vectors are made beside the workers: its model loads early
            from gleaner.retrieval.prepare import prepare_in_worker

            cache = self.settings.model_cache_dir
            pool.aside_warmup = (prepare_in_worker, ([], model, str(cache) if cache else None))
        return pool

    def _offloaded_model(self) -> str | None:
        """The model ingest's chunks are embedded with beside the extraction processes
        (GLEANER_EMBED_BESIDE_EXTRACTION): the process's own (none when that is off, a test overrides
        the embedder, crawls do not embed, or the model is not inline)."""
        from gleaner.retrieval.embedder import EmbedModel

        s = self.settings
        inline = self.embedder_override is None and s.embed_after_crawl and s.embed_model == EmbedModel.STATIC
        return str(EmbedModel.STATIC) if inline and s.embed_beside_extraction else None

    @_built_once
    def renderer(self) -> BrowserRenderer | RemoteRenderer:
        """The process's browser (launched on the first page that needs it, kept warm), or the render
        service's client when ``GLEANER_RENDER_URL`` names one (the cloud's functions hold no browser)."""
        if self.renderer_override is not None:
            return self.renderer_override
        from gleaner.render.gate import Limits

        s = self.settings
        limits = Limits(seconds=s.render_seconds, max_requests=s.render_max_requests, max_bytes=s.render_max_bytes)
        if s.render_url:
            from gleaner.render.remote import RemoteRenderer, service_auth

            return RemoteRenderer(s.render_url, auth=service_auth(s), limits=limits)
        from gleaner.render.browser import BrowserRenderer

        return BrowserRenderer(executable=s.chromium_path, user_agent=s.user_agent, limits=limits)

    # Fetching (gleaner/runtime/fetchdeps.py): a run's fetchers and what every fetcher of the process shares.
    new_fetcher = fetchdeps.new_fetcher
    run_settings = fetchdeps.run_settings
    run_options = fetchdeps.run_options
    host_slots = _built_once(fetchdeps.host_slots)
    tls_context = _built_once(fetchdeps.tls_context)
    host_table = _built_once(fetchdeps.host_table)
    _host_politeness = fetchdeps.host_politeness

    def close(self) -> None:
        if "renderer" in self.__dict__ and self.renderer_override is None:
            self.renderer.close()
        if "extract_pool" in self.__dict__:
            self.extract_pool.close()
        if "engine" in self.__dict__ and self.engine_override is None:
            self.engine.dispose()
        if "bus" in self.__dict__ and self.bus_override is None and hasattr(self.bus, "close"):
            self.bus.close()


_process_deps: Deps | None = None
_process_lock = threading.Lock()


def process_deps(env: Mapping[str, str] | None = None) -> Deps:
    """The per-process Deps for Cloud Functions: built on first use, reused across invocations."""
    global _process_deps
    with _process_lock:
        if _process_deps is None:
            _process_deps = Deps(Settings.from_env(os.environ if env is None else env))
        return _process_deps


def reset_process_deps() -> None:
    """Close and forget the per-process Deps; the next :func:`process_deps` builds a new one (tests)."""
    global _process_deps
    with _process_lock:
        if _process_deps is not None:
            _process_deps.close()
        _process_deps = None
