"""Structured logs for Cloud Logging: one JSON object per line on stdout.

Cloud Logging reads a JSON line written by a function as a structured entry: ``severity``
decides the level it is filed under, ``message`` is what the console shows, and
``logging.googleapis.com/trace`` (``projects/P/traces/T``) groups the line with the request
that caused it; ``logging.googleapis.com/labels`` are indexed key-values; ``extra={"fields": {…}}``
adds top-level values (``event``, counts) that Terraform's log-based metrics select. Each line carries
the labels ``stage``, ``run_id`` and ``site_domain`` of the delivery being handled, so one
run's lines can be filtered across every function.

Why the handler is (re)installed on every delivery, not once: with ``LOG_EXECUTION_ID=true``
(set for 2nd-gen functions) functions-framework calls ``logging.config.dictConfig`` *after*
importing ``main.py`` (3.10) or before it (3.x earlier): it replaces the root handlers, sets
the root level to WARNING and disables every logger that already existed. So
:func:`install` runs at import and :func:`delivery` checks again (one list lookup) when a
request arrives. functions-framework's own stdout wrapper then merges its ``execution_id``
label into our JSON line, which is why the line is written to ``sys.stdout`` as it is at the
time of the call.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from enum import StrEnum
from types import MappingProxyType

TRACE_FIELD = "logging.googleapis.com/trace"
SPAN_FIELD = "logging.googleapis.com/spanId"
LABELS_FIELD = "logging.googleapis.com/labels"
# The labels a delivery may carry, in the order they are shown.
LABELS = ("stage", "run_id", "site_domain")

_CLOUD_TRACE = re.compile(r"^(?P<trace>[0-9a-fA-F]{32})(?:/(?P<span>\d+))?")
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-(?P<trace>[0-9a-f]{32})-(?P<span>[0-9a-f]{16})-[0-9a-f]{2}$")

class Event(StrEnum):
    """The ``event`` field of lines that Terraform's log-based metrics count (terraform/monitoring.tf)."""

    SCRAPE_BATCH = "scrape-batch"  # one per scrape task, with pages_fetched / pages_failed / …
    DEAD_LETTER = "dead-letter"  # a message that exhausted its deliveries, recorded as a failure
    TASK_GAVE_UP = "task-gave-up"  # a scrape task on its last attempt, recorded as a failure
    RUN_SWEPT = "run-swept"  # a run idle past the limit that the sweep settled (it was stuck)


# Read-only mappings, replaced (never mutated) by delivery() and label().
_context: ContextVar[Mapping[str, str]] = ContextVar("gleaner_log_context", default=MappingProxyType({}))


def trace_of(headers: Mapping[str, str]) -> tuple[str, str | None] | None:
    """(trace id, span id) from ``X-Cloud-Trace-Context`` or W3C ``traceparent``; None without one."""
    cloud = _CLOUD_TRACE.match(headers.get("X-Cloud-Trace-Context", "") or "")
    if cloud:
        span = cloud.group("span")
        # Cloud Logging wants the span as 16 hex digits; this header gives it in decimal.
        return cloud.group("trace").lower(), format(int(span), "016x")[-16:] if span else None
    parent = _TRACEPARENT.match((headers.get("traceparent", "") or "").strip().lower())
    if parent and parent.group("trace") != "0" * 32:
        return parent.group("trace"), parent.group("span")
    return None


class CloudFormatter(logging.Formatter):
    """A record as one Cloud Logging JSON object (no newlines inside: the message is escaped)."""

    def __init__(self, project: str | None = None) -> None:
        super().__init__()
        self.project = project

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip()
        entry: dict[str, object] = {
            "severity": record.levelname if record.levelno != logging.WARN else "WARNING",
            "message": message,
            "logger": record.name,
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, Mapping):
            # Named values (``extra={"fields": {"event": …}}``) the log-based metrics select and extract.
            entry.update({k: v for k, v in fields.items() if k not in entry and not k.startswith("logging.")})
        context = dict(_context.get())
        trace, span = context.pop("trace", None), context.pop("span", None)
        if trace and self.project:
            entry[TRACE_FIELD] = f"projects/{self.project}/traces/{trace}"
            if span:
                entry[SPAN_FIELD] = span
        labels = {k: context[k] for k in LABELS if context.get(k)}
        if labels:
            entry[LABELS_FIELD] = labels
        return json.dumps(entry, ensure_ascii=False, default=str)


class StdoutJsonHandler(logging.Handler):
    """Writes each record as one line to ``sys.stdout`` looked up per record (see the module doc)."""

    def __init__(self, project: str | None = None) -> None:
        super().__init__(logging.NOTSET)
        self.project = project
        self.setFormatter(CloudFormatter(project))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            stream = sys.stdout
            # Two writes: functions-framework's wrapper parses the first as one JSON payload and
            # ignores a bare newline; a plain stream gets the line and its end.
            stream.write(line)
            stream.write("\n")
            stream.flush()
        except Exception:  # logging must never break the handler that logs
            self.handleError(record)


_installed: StdoutJsonHandler | None = None


def install(project: str | None = None, level: int = logging.INFO) -> StdoutJsonHandler:
    """Make the root logger write JSON lines at ``level``, replacing the plain console handlers."""
    global _installed
    if _installed is None or (project and _installed.project != project):
        _installed = StdoutJsonHandler(project)
    root = logging.getLogger()
    for handler in _console_handlers(root):
        root.removeHandler(handler)
    if _installed not in root.handlers:
        root.addHandler(_installed)
    if root.level == logging.NOTSET or root.level > level:
        root.setLevel(level)
    # dictConfig(disable_existing_loggers=True) silences loggers created before it (ours, at import).
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if name.startswith("gleaner") and isinstance(logger, logging.Logger):
            logger.disabled = False
    return _installed


def _console_handlers(root: logging.Logger) -> list[logging.Handler]:
    """Plain stream handlers (functions-framework's, basicConfig's) that would print each record again.
    Subclasses are left alone: they are someone's capture (pytest's caplog), not a console."""
    return [h for h in root.handlers if type(h) is logging.StreamHandler]


def installed() -> bool:
    root = logging.getLogger()
    return (_installed is not None and _installed in root.handlers and not _console_handlers(root)
            and root.getEffectiveLevel() <= logging.INFO)


@contextmanager
def delivery(stage: str, headers: Mapping[str, str] | None = None, **labels: str | None) -> Iterator[None]:
    """Label every line logged while handling one delivery; re-assert the handler first (if installed)."""
    if _installed is not None and not installed():
        install(_installed.project)
    context: dict[str, str] = {"stage": stage}
    context.update({k: v for k, v in labels.items() if v})
    found = trace_of(headers) if headers is not None else None
    if found:
        context["trace"], span = found[0], found[1]
        if span:
            context["span"] = span
    token = _context.set(context)
    try:
        yield
    finally:
        _context.reset(token)


def label(**labels: str | None) -> None:
    """Add labels (the run id once it is known) to the current delivery's lines."""
    current = dict(_context.get())
    current.update({k: v for k, v in labels.items() if v})
    _context.set(current)
