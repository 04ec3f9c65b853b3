"""One typed settings object, read from the environment once.

Every default lives here with the reason for it. Nothing else in Gleaner reads
``os.environ``: the composition root calls :meth:`Settings.from_env` and passes
the result down; tests pass their own mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gleaner import __version__
from gleaner.errors import ConfigError
from gleaner.settings.envvalues import (
    HttpAuth,
    IPNetwork,
    default_home,
    default_pg_templates,
    env_bool,
    env_choice,
    env_embed_model,
    env_float,
    env_http_auth,
    env_int,
    parse_networks,
)
from gleaner.settings.llm import llm_settings_of
from gleaner.settings.secrets import allowed_hosts_of, webhook_secret_of

PROJECT_URL = "https://github.com/gleaner-crawler/gleaner"
# Robots groups are matched on the bare product token, never the whole header (FACTS.md).
ROBOTS_TOKEN = "gleaner"


DEFAULT_TRUSTED_PROXIES: tuple[IPNetwork, ...] = parse_networks("127.0.0.0/8,::1/128")

# The politeness settings whose source is recorded, and their variables.
POLITENESS_VARIABLES = {"host_delay": "GLEANER_HOST_DELAY", "host_concurrency": "GLEANER_HOST_CONCURRENCY"}


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything configurable, with safe defaults for one laptop."""

    # GLEANER_HOME: where embedded state lives (PostgreSQL data dir, local blobs), the same for every
    # command wherever it is started (DESIGN.md "Where data lives").
    data_dir: Path = field(default_factory=lambda: default_home({}))
    # None means: start the embedded PostgreSQL (pgserver) under data_dir.
    database_url: str | None = None
    # GLEANER_PG_TEMPLATE_DIR: where a new embedded data dir's migrated cluster is cached, to be copied
    # instead of running initdb and the migrations again (store/backends/pgtemplate.py); None ("off"): initdb each time.
    pg_template_dir: Path | None = field(default_factory=lambda: default_pg_templates({}))
    # None means: a local directory under data_dir with the bucket's exact layout.
    blob_url: str | None = None
    # Non-public networks the fetcher may reach. Empty: only public addresses (SSRF safety).
    allow_networks: tuple[IPNetwork, ...] = ()
    webhook_secret: str | None = None
    # Host names `gleaner serve` answers to besides the bound one (a proxy's public name): any other Host
    # is refused (DNS rebinding), and naming one means someone else reaches the server, so every request
    # then needs a credential (docs/security.md).
    allowed_hosts: tuple[str, ...] = ()
    # Proxies whose X-Forwarded-For / Forwarded names the client (login back-off keys on that client, so one
    # client's failures never hold another's login back). Default: a proxy on this machine.
    trusted_proxies: tuple[IPNetwork, ...] = DEFAULT_TRUSTED_PROXIES
    # "local" runs the stages in-process; "gcp" publishes to Pub/Sub and Cloud Tasks.
    bus: str = "local"
    project: str | None = None
    region: str = "europe-west1"
    pubsub_emulator_host: str | None = None
    storage_emulator_host: str | None = None
    # Cloud Tasks target for scrape batches (the scrape function's URL) and its OIDC identity.
    scrape_url: str | None = None
    tasks_queue: str = "gleaner-scrape"
    tasks_service_account: str | None = None
    # "cloudtasks" in the cloud; "pubsub" in emulator mode, where Cloud Tasks has no emulator and
    # scrape batches travel on the `scrape` topic, pushed unwrapped to the scrape function's on_http.
    tasks_backend: str = "cloudtasks"
    # Deliveries of one message/task before it is dead-lettered. Terraform gives the same number to
    # the dead-letter policies and the queue, so the entry points know which attempt is the last one.
    # 15, not Pub/Sub's minimum of 5: a function at its max instances answers 429, which counts as an
    # attempt, and a burst of crawls must not dead-letter good messages (backoff 10 s doubling to
    # 600 s spreads 15 attempts over about an hour and a half).
    max_delivery_attempts: int = 15
    # Seconds to wait for a publish to be durable; past it the handler fails and is redelivered.
    publish_timeout: float = 60.0
    # Cloud SQL instance connection name (project:region:instance) for the connector path.
    cloudsql_instance: str | None = None
    cloudsql_user: str | None = None
    cloudsql_database: str = "gleaner"
    # Private IP when the functions reach Cloud SQL through a VPC connector; public IP (still TLS
    # and IAM-authenticated by the connector) otherwise.
    cloudsql_private_ip: bool = False
    # A NOLOGIN role every connection switches to (SET ROLE), so that the tables the first function
    # creates are owned by a role all functions' IAM database users share (terraform: db_bootstrap_sql).
    database_role: str | None = None

    user_agent: str = f"Gleaner/{__version__} (+{PROJECT_URL})"
    # Refuse rather than truncate: a 10 MiB page is far past any article (DESIGN.md).
    max_body_bytes: int = 10 * 1024 * 1024
    # Decompressed bodies may be larger than their wire size, but not unboundedly (zip bombs).
    max_decompressed_bytes: int = 20 * 1024 * 1024
    max_redirects: int = 5
    # RFC 9309 asks a parser to read at least 500 KiB; a longer robots.txt is robots-unknown (fail closed).
    robots_max_bytes: int = 512 * 1024
    # One polite retry after a 429/503; more would keep hammering a host that said it is overloaded.
    max_retries: int = 1
    # The longest Retry-After waited for; a longer one makes the URL unavailable this run (and slows the host).
    max_retry_after: float = 30.0
    # Seconds for one exchange, connect to last byte (a total deadline, not a per-read timeout);
    # a slow drip past this is unavailable.
    fetch_timeout: float = 20.0
    # Politeness: one request at a time and at least one second between requests per host,
    # unless robots.txt's Crawl-delay asks for more.
    host_concurrency: int = 1
    host_delay: float = 1.0
    # Requests on the wire at once in one process, across hosts and runs (a request waiting out its
    # host's delay does not count). Sixteen keeps a laptop's connection and the extraction processes
    # busy while dozens of polite sites (one request a second each) fetch side by side; more adds
    # little on two cores, where extraction, not the network, is the limit.
    fetch_concurrency: int = 16
    # Runs in progress at once in one process (`gleaner tick`/`watch`, `gleaner crawl URL URL ...`);
    # the others start as these end, so a cycle over more sites than this costs a second round. A
    # polite run mostly waits for its host's delay: each holds three bus threads, a fetcher with one
    # connection and its pages in flight (a few MB), so a hundred stay well inside a laptop's memory
    # and file descriptors, while the shared extraction pool and GLEANER_FETCH_CONCURRENCY keep the
    # CPU and the network bounded whatever this is.
    max_runs: int = 100
    # Per-run budget; 0 means unlimited. Exhausting it ends the run partial.
    run_max_requests: int = 0
    run_max_bytes: int = 0
    run_max_seconds: float = 0.0
    # Map defaults.
    default_limit: int = 1000
    default_max_depth: int = 3
    # The ADR's batch size for the scrape phase (and Cloud Tasks' 1 MB per task is never near).
    scrape_batch_size: int = 100
    # Extraction processes for the local runner; 0 means one per core.
    extract_workers: int = 0
    # Webhook body cap: a poller batch of a few thousand articles fits well inside 1 MiB.
    webhook_max_bytes: int = 1024 * 1024

    # -- run control and failures (issue 10) --
    # Once a process has reached the database, a refused connection is retried this long before it is
    # an error: a PostgreSQL restart takes seconds, and waiting it out costs a pause instead of the run.
    database_wait_seconds: float = 30.0
    # `gleaner sweep` settles active runs idle this long (no stage touched them): far beyond one scrape
    # batch (100 pages at the polite one-second delay), short enough that a crashed run is noticed the
    # same hour.
    sweep_idle_seconds: float = 1800.0

    # -- discovery bounds and fetch-once (issue 16) --
    # Links read from one page by map's walk: a real hub (an HTML sitemap, a big category page) holds
    # a few thousand; past that a page is a trap or a dump, and reading on only costs memory.
    max_links_per_page: int = 5000

    # -- change events and webhooks (DESIGN.md "Outbound notifications") ------------------------------
    # First retry of a failed webhook delivery after this many seconds, doubling each time: the
    # specification's receivers expect retries within a minute, then spaced out.
    notify_retry_seconds: float = 5.0
    # Attempts of one delivery before it is marked failed (5 s doubling: the last one about 10 minutes in).
    notify_max_attempts: int = 8
    # Seconds a receiver has to answer one attempt; Standard Webhooks receivers answer quickly.
    notify_timeout: float = 10.0
    # Seconds a local run may wait for its webhooks before it returns. None by default: a crawl ends when
    # its pages are done, and a subscriber that fails or never answers must not hold it (changes/sender.py);
    # `gleaner watch`, `gleaner serve` and `gleaner deliver` send what is pending.
    notify_run_wait: float = 0.0
    # Cloud Tasks queue for deliveries (terraform/changes.tf) and the URL of the HTTP handler that
    # performs one attempt (None: the scrape function's URL + /notify/deliver, its private Tasks target).
    notify_queue: str = "gleaner-notify"
    notify_task_url: str | None = None
    # Where people reach this deployment's back office (e.g. https://gleaner.example.org): notification
    # messages link to a document's page under it. None: messages carry no link.
    public_url: str | None = None
    # -- operator control: sites on a schedule (operator/schedule.py) --
    # Bounds of an `--every auto` interval: an hour keeps a busy site fresh without re-reading it all
    # day; a week means a site that never changes is still checked (StormCrawler's adaptive scheduler
    # bounds its interval the same way).
    schedule_min_seconds: int = 3600
    schedule_max_seconds: int = 7 * 86400
    # Where an `auto` site starts: once a day, then the change observed moves it.
    schedule_auto_start_seconds: int = 86400
    # `gleaner watch` ticks this often; Cloud Scheduler's tick job uses the same cadence.
    watch_seconds: float = 60.0

    # -- provenance (citations, erasure, retention) --
    # Hex secret behind the erased-content digests (keyed per tenant). Unset locally: one is generated
    # under data_dir on first use; the cloud must set it so every function derives the same digests.
    erasure_key: str | None = None
    # Versions kept per document by `gleaner prune` (the ADR's open question suggests 10); the current
    # version and every version a citation or composite pins are kept whatever the number.
    keep_versions: int = 10
    # Days a settled run's artefacts (map JSON, samples, raw and content copies) are kept; its fetched
    # bodies go when it settles. Applied by tick, watch and the cloud's sweep (gleaner.stages.upkeep).
    run_artefact_days: int = 30

    # -- production on Google Cloud (issue 14) --------------------------------------------------
    # Bearer by default: a laptop's port has no IAM in front of it. Terraform sets iam.
    http_auth: HttpAuth = HttpAuth.BEARER
    # Per-host turns shared by every process through PostgreSQL (knowledge.host_slots). Off
    # locally, where one process fetches and its in-memory turns suffice; on for function instances.
    shared_politeness: bool = False
    # A scrape batch stops starting fetches this many seconds after it began and hands the rest to a
    # new task: the function's timeout (and the task's dispatch deadline) is 1,800 s, and the margin
    # leaves time to extract and record what is in flight.
    scrape_soft_deadline: float = 1500.0
    # Map's walk starts no new level of links this many seconds after the map began (0: no limit) and
    # the run goes on with what it found: a Pub/Sub-fed function that overruns its timeout is killed
    # and redelivered from the start, so a walk that never fits would end dead-lettered.
    map_soft_deadline: float = 0.0
    # Apply migrations when the engine is first built. On for laptops and tests; Terraform turns it
    # off: the deploy's migrate step owns the schema and runtime roles cannot run DDL.
    auto_migrate: bool = True
    # SQLAlchemy pool per process: pool_size + max_overflow connections at most (the Cloud SQL
    # budget in docs/deployment.md multiplies these by the functions' max instances).
    db_pool_size: int = 5
    db_max_overflow: int = 2
    # JSON lines for Cloud Logging when running as a deployed function (Cloud Run sets K_SERVICE;
    # 2nd-gen functions set LOG_EXECUTION_ID); plain lines on a developer's terminal otherwise.
    cloud_logging: bool = False

    # -- rendering (gleaner.render) --
    # Debian's Chromium: Playwright's own browser downloads are not reachable (FACTS.md).
    chromium_path: str = "/usr/bin/chromium"
    # One rendered page's time, sub-requests and bytes: an SPA needs a handful of requests and a few
    # seconds; a page past these is read as it stands at its budget, never left to hang a batch.
    render_seconds: float = 15.0
    render_max_requests: int = 100
    render_max_bytes: int = 25 * 1024 * 1024
    # The render service (Cloud Run) scrape calls instead of a local browser; None renders in-process.
    render_url: str | None = None
    # GLEANER_EMBED_AFTER_CRAWL: crawl, demo and tick embed their new chunks when their runs end. Off
    # keeps the model (its CPU and a few hundred MB) out of crawling processes; `gleaner index` embeds
    # what is pending later, and meanwhile those chunks are found by their words (docs/retrieval.md).
    embed_after_crawl: bool = True
    # Ingest's new texts chunked and embedded in a process beside the extraction workers (retrieval/prepare.py):
    # off by default, as session 12's runs found it no faster where the machine's cores bound the crawl.
    embed_beside_extraction: bool = False
    # GLEANER_EMBED_MODEL: "static" (the default: a table distilled from MiniLM, embedded inside ingest)
    # or "minilm" (the transformer: better at distant wording, far slower). docs/retrieval.md.
    embed_model: str = "static"
    # GLEANER_RERANK: "none" (the default) or "minilm": search looks at its first few pages again with the
    # transformer (better answers, tens of milliseconds of CPU a passage: gleaner/retrieval/rerank.py).
    rerank: str = "none"
    # GLEANER_MODEL_CACHE: where the static model's distilled table is kept (a cache, keyed by the
    # source model's hash); None: $XDG_CACHE_HOME/gleaner/models, else ~/.cache/gleaner/models.
    model_cache_dir: Path | None = None
    # Where host_delay and host_concurrency came from (fetch/politeness.py's Source values): a site's own
    # politeness beats every source but the command line. Unnamed: the default.
    politeness_sources: Mapping[str, str] = field(default_factory=dict)

    # -- the language-model page decider (decide/, docs/llm.md) --
    # GLEANER_LLM_PROVIDER: "none" (the rules decide alone), "openai" (any OpenAI-compatible endpoint:
    # OpenAI, Ollama, vLLM, llama.cpp's server) or "gemini" (Vertex AI). Off by default: a model costs
    # money or a few GB of memory, and the rules decide well enough to start.
    llm_provider: str = "none"
    # GLEANER_LLM_BASE_URL: the OpenAI-compatible endpoint (ending in /v1); None: OpenAI's own.
    llm_base_url: str | None = None
    # GLEANER_LLM_MODEL: the model's name as the provider knows it (required once a provider is set).
    llm_model: str | None = None
    # GLEANER_LLM_API_KEY: the provider's key (Secret Manager puts it here in the cloud); None for a local
    # server, and for Vertex AI, which uses the function's service account.
    llm_api_key: str | None = field(default=None, repr=False)
    # GLEANER_LLM_JSON_MODE: how the answer's schema is asked for (decide/openai_compat.py); "auto" finds out.
    llm_json_mode: str = "auto"
    # Seconds for one answer: a small model on two cores takes seconds, a hosted one less; past this the
    # page falls back to the rules rather than hold its run.
    llm_timeout: float = 60.0
    # A run's model budget: calls and tokens. A page sample's question is a few hundred tokens, so 200
    # sections cost about 100,000; past the budget the rules decide (with the reason recorded).
    llm_run_max_calls: int = 200
    llm_run_max_tokens: int = 200_000
    # Below this confidence the model's verdict goes to the review queue instead of deciding.
    llm_min_confidence: float = 0.6
    # Price per million prompt / completion tokens, for the cost each decision records (0: a local model).
    llm_price_in: float = 0.0
    llm_price_out: float = 0.0

    extra: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str], **overrides: Any) -> Settings:
        """Build settings from an environment mapping; invalid values raise ConfigError."""
        bus = env.get("GLEANER_BUS", "").strip() or "local"
        if bus not in ("local", "gcp"):
            raise ConfigError(f"GLEANER_BUS must be 'local' or 'gcp', got {bus!r}")
        tasks_backend = env.get("GLEANER_TASKS_BACKEND", "").strip() or "cloudtasks"
        if tasks_backend not in ("cloudtasks", "pubsub"):
            raise ConfigError(f"GLEANER_TASKS_BACKEND must be 'cloudtasks' or 'pubsub', got {tasks_backend!r}")
        d = cls()  # defaults (class attributes are slot descriptors on a slotted dataclass)
        settings = cls(
            data_dir=default_home(env),
            database_url=env.get("GLEANER_DATABASE_URL", "").strip() or None,
            pg_template_dir=default_pg_templates(env),
            blob_url=env.get("GLEANER_BLOB_URL", "").strip() or None,
            allow_networks=parse_networks(env.get("GLEANER_ALLOW_NETWORKS", "")),
            webhook_secret=webhook_secret_of(env),
            allowed_hosts=allowed_hosts_of(env.get("GLEANER_ALLOWED_HOSTS", "")),
            trusted_proxies=(parse_networks(env["GLEANER_TRUSTED_PROXIES"], "GLEANER_TRUSTED_PROXIES")
                             if "GLEANER_TRUSTED_PROXIES" in env else DEFAULT_TRUSTED_PROXIES),
            bus=bus,
            project=env.get("GOOGLE_CLOUD_PROJECT", "").strip() or None,
            region=env.get("GLEANER_REGION", "").strip() or "europe-west1",
            pubsub_emulator_host=env.get("PUBSUB_EMULATOR_HOST", "").strip() or None,
            storage_emulator_host=env.get("STORAGE_EMULATOR_HOST", "").strip() or None,
            scrape_url=env.get("GLEANER_SCRAPE_URL", "").strip() or None,
            tasks_queue=env.get("GLEANER_TASKS_QUEUE", "").strip() or "gleaner-scrape",
            tasks_service_account=env.get("GLEANER_TASKS_SERVICE_ACCOUNT", "").strip() or None,
            tasks_backend=tasks_backend,
            max_delivery_attempts=env_int(env, "GLEANER_MAX_DELIVERY_ATTEMPTS", d.max_delivery_attempts, 1),
            publish_timeout=env_float(env, "GLEANER_PUBLISH_TIMEOUT", d.publish_timeout, 1.0),
            cloudsql_instance=env.get("GLEANER_CLOUDSQL_INSTANCE", "").strip() or None,
            database_role=env.get("GLEANER_DATABASE_ROLE", "").strip() or None,
            cloudsql_private_ip=env.get("GLEANER_CLOUDSQL_PRIVATE_IP", "").strip().lower() in ("1", "true", "yes"),
            cloudsql_user=env.get("GLEANER_CLOUDSQL_USER", "").strip() or None,
            cloudsql_database=env.get("GLEANER_CLOUDSQL_DATABASE", "").strip() or "gleaner",
            max_body_bytes=env_int(env, "GLEANER_MAX_BODY_BYTES", d.max_body_bytes, 1),
            max_decompressed_bytes=env_int(env, "GLEANER_MAX_DECOMPRESSED_BYTES", d.max_decompressed_bytes, 1),
            max_redirects=env_int(env, "GLEANER_MAX_REDIRECTS", d.max_redirects, 0),
            robots_max_bytes=env_int(env, "GLEANER_ROBOTS_MAX_BYTES", d.robots_max_bytes, 1),
            max_retries=env_int(env, "GLEANER_MAX_RETRIES", d.max_retries, 0),
            max_retry_after=env_float(env, "GLEANER_MAX_RETRY_AFTER", d.max_retry_after, 0.0),
            fetch_timeout=env_float(env, "GLEANER_FETCH_TIMEOUT", d.fetch_timeout, 0.1),
            host_concurrency=env_int(env, "GLEANER_HOST_CONCURRENCY", d.host_concurrency, 1),
            host_delay=env_float(env, "GLEANER_HOST_DELAY", d.host_delay, 0.0),
            fetch_concurrency=env_int(env, "GLEANER_FETCH_CONCURRENCY", d.fetch_concurrency, 1),
            max_runs=env_int(env, "GLEANER_MAX_RUNS", d.max_runs, 1),
            run_max_requests=env_int(env, "GLEANER_RUN_MAX_REQUESTS", 0, 0),
            run_max_bytes=env_int(env, "GLEANER_RUN_MAX_BYTES", 0, 0),
            run_max_seconds=env_float(env, "GLEANER_RUN_MAX_SECONDS", 0.0, 0.0),
            extract_workers=env_int(env, "GLEANER_EXTRACT_WORKERS", 0, 0),
            webhook_max_bytes=env_int(env, "GLEANER_WEBHOOK_MAX_BYTES", d.webhook_max_bytes, 1),
            database_wait_seconds=env_float(env, "GLEANER_DATABASE_WAIT_SECONDS", d.database_wait_seconds, 0.0),
            sweep_idle_seconds=env_float(env, "GLEANER_SWEEP_IDLE_SECONDS", d.sweep_idle_seconds, 0.0),
            max_links_per_page=env_int(env, "GLEANER_MAX_LINKS_PER_PAGE", d.max_links_per_page, 1),
            notify_retry_seconds=env_float(env, "GLEANER_NOTIFY_RETRY_SECONDS", d.notify_retry_seconds, 0.0),
            notify_max_attempts=env_int(env, "GLEANER_NOTIFY_MAX_ATTEMPTS", d.notify_max_attempts, 1),
            notify_timeout=env_float(env, "GLEANER_NOTIFY_TIMEOUT", d.notify_timeout, 0.1),
            notify_run_wait=env_float(env, "GLEANER_NOTIFY_RUN_WAIT", d.notify_run_wait, 0.0),
            notify_queue=env.get("GLEANER_NOTIFY_QUEUE", "").strip() or d.notify_queue,
            notify_task_url=env.get("GLEANER_NOTIFY_TASK_URL", "").strip() or None,
            public_url=env.get("GLEANER_PUBLIC_URL", "").strip().rstrip("/") or None,
            schedule_min_seconds=env_int(env, "GLEANER_SCHEDULE_MIN_SECONDS", d.schedule_min_seconds, 1),
            schedule_max_seconds=env_int(env, "GLEANER_SCHEDULE_MAX_SECONDS", d.schedule_max_seconds, 1),
            schedule_auto_start_seconds=env_int(env, "GLEANER_SCHEDULE_AUTO_START_SECONDS",
                                             d.schedule_auto_start_seconds, 1),
            watch_seconds=env_float(env, "GLEANER_WATCH_SECONDS", d.watch_seconds, 1.0),
            erasure_key=env.get("GLEANER_ERASURE_KEY", "").strip() or None,
            keep_versions=env_int(env, "GLEANER_KEEP_VERSIONS", d.keep_versions, 1),
            run_artefact_days=env_int(env, "GLEANER_RUN_ARTEFACT_DAYS", d.run_artefact_days, 1),
            http_auth=env_http_auth(env, "GLEANER_HTTP_AUTH"),
            shared_politeness=env_bool(env, "GLEANER_SHARED_POLITENESS", d.shared_politeness),
            scrape_soft_deadline=env_float(env, "GLEANER_SCRAPE_SOFT_DEADLINE", d.scrape_soft_deadline, 1.0),
            map_soft_deadline=env_float(env, "GLEANER_MAP_SOFT_DEADLINE", d.map_soft_deadline, 0.0),
            auto_migrate=env_bool(env, "GLEANER_AUTO_MIGRATE", d.auto_migrate),
            db_pool_size=env_int(env, "GLEANER_DB_POOL_SIZE", d.db_pool_size, 1),
            db_max_overflow=env_int(env, "GLEANER_DB_MAX_OVERFLOW", d.db_max_overflow, 0),
            cloud_logging=bool(env.get("K_SERVICE", "").strip() or env.get("LOG_EXECUTION_ID", "").strip()),
            chromium_path=env.get("GLEANER_CHROMIUM", "").strip() or d.chromium_path,
            render_seconds=env_float(env, "GLEANER_RENDER_SECONDS", d.render_seconds, 0.5),
            render_max_requests=env_int(env, "GLEANER_RENDER_MAX_REQUESTS", d.render_max_requests, 0),
            render_max_bytes=env_int(env, "GLEANER_RENDER_MAX_BYTES", d.render_max_bytes, 1),
            render_url=env.get("GLEANER_RENDER_URL", "").strip() or None,
            embed_after_crawl=env_bool(env, "GLEANER_EMBED_AFTER_CRAWL", d.embed_after_crawl),
            embed_beside_extraction=env_bool(env, "GLEANER_EMBED_BESIDE_EXTRACTION", d.embed_beside_extraction),
            embed_model=env_embed_model(env, "GLEANER_EMBED_MODEL"),
            rerank=env_choice(env, "GLEANER_RERANK", ("none", "minilm")),
            model_cache_dir=Path(env["GLEANER_MODEL_CACHE"].strip()).expanduser().absolute()
            if env.get("GLEANER_MODEL_CACHE", "").strip() else None,
            **llm_settings_of(env, d),
            extra={k: v for k, v in env.items() if k.startswith("GLEANER_") and k != "GLEANER_LLM_API_KEY"},
            politeness_sources={name: "environment" for name, var in POLITENESS_VARIABLES.items()
                                if env.get(var, "").strip()},
        )
        return replace(settings, **overrides) if overrides else settings

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)
