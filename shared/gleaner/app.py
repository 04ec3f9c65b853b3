"""The composition root: builds every adapter from one Settings object, lazily, once.

Stages receive a :class:`Deps` and never construct clients themselves. The CLI
and each Cloud Function build one ``Deps`` per process (functions keep it across
invocations); tests build their own from their own environment mapping.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from gleaner.config import Settings

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from gleaner.bus.port import Bus
    from gleaner.decide.port import Decider
    from gleaner.extract.pool import ExtractPool
    from gleaner.fetch.fetcher import Fetcher
    from gleaner.store.blobs import BlobStore
    from gleaner.store.metadata import MetadataStore
    from gleaner.store.references import ReferenceStore


@dataclass
class Deps:
    settings: Settings
    # Optional injections (tests, the local runner); anything left None is built from settings.
    bus_override: Bus | None = None
    fetcher_factory: Callable[[Settings], Fetcher] | None = None
    engine_override: Engine | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @cached_property
    def engine(self) -> Engine:
        if self.engine_override is not None:
            return self.engine_override
        from gleaner.store import db

        engine = db.create_engine(self.settings)
        db.ensure_schema(engine)
        return engine

    @cached_property
    def metadata(self) -> MetadataStore:
        from gleaner.store.metadata import MetadataStore

        return MetadataStore(self.engine)

    @cached_property
    def references(self) -> ReferenceStore:
        from gleaner.store.references import ReferenceStore

        return ReferenceStore(self.engine)

    @cached_property
    def blobs(self) -> BlobStore:
        from gleaner.store.blobs import open_blob_store

        return open_blob_store(self.settings)

    @cached_property
    def bus(self) -> Bus:
        if self.bus_override is not None:
            return self.bus_override
        if self.settings.bus == "gcp":
            from gleaner.bus.gcp import GcpBus

            return GcpBus(self.settings)
        from gleaner.bus.local import LocalBus

        return LocalBus()

    @cached_property
    def decider(self) -> Decider:
        from gleaner.decide.rules import RuleDecider

        return RuleDecider()

    @cached_property
    def extract_pool(self) -> ExtractPool:
        from gleaner.extract.pool import ExtractPool

        return ExtractPool(self.settings.extract_workers)

    def new_fetcher(self, **overrides: Any) -> Fetcher:
        """A fresh fetcher (robots cache, host state, budget) for one run or one batch."""
        settings = self.settings.with_(**overrides) if overrides else self.settings
        if self.fetcher_factory is not None:
            return self.fetcher_factory(settings)
        from gleaner.fetch.fetcher import Fetcher

        return Fetcher(settings)

    def close(self) -> None:
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
