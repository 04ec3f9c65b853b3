"""A crawl request's HTTP body (the map function's POST, ``gleaner submit``, Cloud Scheduler's ticks) read into
a validated :class:`~gleaner.messages.CrawlRequested`, or refused as the caller's bad input."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import fields

from gleaner.errors import InvalidInput
from gleaner.messages import CrawlRequested

_CRAWL_FIELDS = {f.name for f in fields(CrawlRequested)}


def crawl_request_from(body: bytes, headers: Mapping[str, str]) -> CrawlRequested:
    """A validated CrawlRequested from an HTTP body. Cloud Scheduler retries keep one request id."""
    from gleaner.urls import canonicalize, validate_glob

    try:
        data = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"body is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidInput("body must be a JSON object")
    data = dict(data)
    if "url" in data and "target_url" not in data:
        data["target_url"] = data.pop("url")
    unknown = sorted(set(data) - _CRAWL_FIELDS)
    if unknown:
        # A misspelt option ("exlude") silently ignored would crawl what the caller meant to skip.
        raise InvalidInput(f"unknown fields {unknown}")
    job, at = headers.get("X-CloudScheduler-JobName"), headers.get("X-CloudScheduler-ScheduleTime")
    if not data.get("request_id"):
        # A scheduled tick is one request however often Scheduler retries it.
        data["request_id"] = f"scheduler:{job}:{at}" if job and at else str(uuid.uuid4())
    if job and "triggered_by" not in data:
        data["triggered_by"] = "cron"
    for name in ("include", "exclude", "feeds"):
        if name in data and not (isinstance(data[name], list) and all(isinstance(g, str) for g in data[name])):
            raise InvalidInput(f"{name} must be a list of strings")
    for name in ("limit", "max_depth"):
        value = data.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0
                                  or (name == "limit" and value < 1)):
            raise InvalidInput(f"{name} must be a positive integer")
    for name in ("max_requests", "max_bytes", "max_seconds"):
        value = data.get(name)
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool) or value < 0):
            raise InvalidInput(f"{name} must be a number >= 0")
    if "honour_lastmod" in data and not isinstance(data["honour_lastmod"], bool):
        raise InvalidInput("honour_lastmod must be true or false")
    if not isinstance(data.get("target_url"), str):
        raise InvalidInput("target_url (or url) is required")
    message = CrawlRequested.from_dict(data)
    canonicalize(message.target_url)
    for glob in (*message.include, *message.exclude):
        validate_glob(glob)
    if message.triggered_by not in ("cron", "webhook", "backoffice", "api"):
        raise InvalidInput(f"unknown triggered_by {message.triggered_by!r}")
    return message
