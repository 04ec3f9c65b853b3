"""The metadata repository: every SQL statement the stages run, batched per call.

Each method is one short transaction. Per-page writes are one multi-row
statement (rows as one JSON parameter, or ``unnest`` of arrays), never a loop of single statements: pg8000's
executemany is round-trip bound (FACTS.md). Idempotency comes from keys:
``ON CONFLICT`` on business identity, and a per-(run, document) ledger row whose
``fetch_outcome`` / ``snapshot_outcome`` once set is never overwritten, so a
redelivered message finds its work done. Counters are recomputed from the
ledger, never incremented, so they cannot double-count.

``MetadataStore`` is the one object the stages, the CLI and the runner hold
(``deps.metadata``); its methods live with their concern, one class a module
over the engine and transaction of ``sqlstore.SqlStore``:

- ``records.py``: the values passed in and out (RunPage, Decision, FetchRecord,
  SnapshotInput, SnapshotResult), re-exported here;
- ``runs.py``: source hosts, runs and their status, robots decisions, documents and
  run pages, decisions and scrape batches (``RunStore``);
- ``fetches.py``: a batch's fetch outcomes (``FetchStore``);
- ``counters.py``: budget spent, counters, finishing a run (``CounterStore``);
- ``runcontrol.py``: heartbeats, ending, claiming and sweeping runs (``RunControlStore``);
- ``snapshots.py``: versioning changed content (``SnapshotStore``);
- ``reads.py``: run summaries, documents, snapshots and texts for the CLI and
  ingest (``ReadStore``);
- ``events.py``: change events, listed and drained by the outbox (``EventStore``);
  recorded by the other modules inside the transaction of their change, as is the
  lifecycle (``lifecycle.py``);
- ``subscriptions.py`` and ``deliveries.py``: webhook subscriptions, the delivery
  queue and its log (``SubscriptionStore``, ``DeliveryStore``);
- ``prefetch.py``: answers map and sample kept for scrape, a walked page's links (``PrefetchStore``);
- ``lastmod.py``: sitemap lastmods on the ledger (``LastmodStore``);
- ``rules.py``: the operator's skip / block rules and their materialisation (``RuleStore``);
- ``review.py``: pages waiting for the operator, and the operator's decision (``ReviewStore``);
- ``routing.py``: routings, what ingest may take, and composites (``RoutingStore``); ``composites.py``: a
  composite's lifecycle moves and their history (``CompositeStore``, over ``RoutingStore``);
- ``replay.py``: a past run's stored inputs and a replay's own run (``ReplayStore``);
- ``idprefix.py``: which ids start with what was typed (``IdPrefixStore``, for :mod:`gleaner.display.idprefix`);
- ``sites.py``: the sites registry (``SiteStore``); ``schedule.py``: claiming due sites (``ScheduleStore``).

Some statements live in modules of their own (discovery.py for map, decisions.py for
sample, notmodified.py for scrape), each reached through a method of these classes:
the stages, the CLI and the HTTP API hold ``deps.metadata`` and never an engine; the decisions
those statements carry out (which rule gates a page, when a site is due) are pure functions in
:mod:`gleaner.operator`. texts.py is the ingest stage's own TextStore.
"""

from __future__ import annotations

from gleaner.store.documents.composites import CompositeStore
from gleaner.store.documents.erasurereads import ErasureReadStore
from gleaner.store.documents.snapshots import SnapshotStore
from gleaner.store.idprefix import IdPrefixStore
from gleaner.store.ledger.counters import CounterStore
from gleaner.store.ledger.fetches import FetchStore
from gleaner.store.ledger.lastmod import LastmodStore
from gleaner.store.ledger.prefetch import PrefetchStore
from gleaner.store.ledger.records import Decision, FetchRecord, RunPage, SnapshotInput, SnapshotResult
from gleaner.store.ledger.replay import ReplayStore
from gleaner.store.ledger.runcontrol import RunControlStore
from gleaner.store.ledger.runs import RunStore
from gleaner.store.notifications.deliveries import DeliveryStore
from gleaner.store.notifications.events import EventStore
from gleaner.store.notifications.subscriptions import SubscriptionStore
from gleaner.store.reads import ReadStore
from gleaner.store.registry.review import ReviewStore
from gleaner.store.registry.rules import RuleStore
from gleaner.store.registry.schedule import ScheduleStore
from gleaner.store.registry.sites import SiteStore
from gleaner.store.watch import WatchStore

__all__ = ["Decision", "FetchRecord", "MetadataStore", "RunPage", "SnapshotInput", "SnapshotResult"]


class MetadataStore(RunStore, FetchStore, RunControlStore, CounterStore, SnapshotStore, ReadStore, PrefetchStore,
                    LastmodStore, RuleStore, ReviewStore, CompositeStore, SiteStore, ScheduleStore, EventStore,
                    SubscriptionStore, DeliveryStore, ReplayStore, IdPrefixStore,
                    ErasureReadStore, WatchStore):
    """The metadata repository over one engine: every method of the classes it is made of."""
