"""The ingest function's HTTP surface, framework-free: the feed-poller webhook and reference retrieval.

Adapters (``functions/ingest/main.py`` under functions-framework, ``gleaner serve``
under waitress) turn their request into a :class:`WebhookRequest` whose
``read_body`` reads at most ``webhook_max_bytes`` (:func:`gleaner.serving.web.read_body`),
and send back the ``(status, json)`` that :func:`handle` answers.

Routes (all need a bearer: ``$GLEANER_WEBHOOK_SECRET``, the admin, or a workspace
token from ``gleaner tokens add``, which acts as its workspace)::

    POST /             {"articles": [...]}  -> 202 {"accepted", "duplicates", "rejected": [{"index", "reason"}]}
                       empty body or {}     -> 202 {"walk": true, "scheduled": n}
                       {"full_reprocess": true} -> the same walk, re-fetching every passed URL (the
                                            operator's bearer only: a workspace token gets 403)
    GET  /refs?q=…     ranked previews      -> 200 {"query", "results": [...]} (a workspace token: the
                                            items its own feed brought; the admin: every item)
    GET  /refs/{id}    one item, verbatim   -> 200 {...} or 404
    GET  /v1/texts/{text_hash}?start=&end=  a slice of canonical text -> 200 {"text_hash", "start",
                       "end", "text", "length"}, 400 bad range, 404 unknown text (textsapi.py)

Checks run in this order, so a request learns nothing it is not entitled to and
an unauthenticated caller costs no body read: 404 unknown path, 405 wrong
method, 401 missing or wrong bearer (constant-time compare), then the body:
413 over the cap, 400 malformed (every reason listed;
text that is not valid Unicode, a lone surrogate or a NUL is malformed, in the
body and in the query alike). Articles are validated one by one: valid ones are
recorded even when siblings are rejected (each rejection says its index and
why); a batch with no valid article at all is a 400. A database refusal of the
input itself (a data exception) is a 400, never "retry later".
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gleaner.app import Deps
from gleaner.cloud.callers import bearer_token, secret_matches
from gleaner.errors import InvalidInput, RetryableError
from gleaner.messages import ArticlesAccepted
from gleaner.serving.textcheck import text_problem
from gleaner.serving.textsapi import TextReader, text_slice
from gleaner.serving.web import BodyRefused
from gleaner.store.access.tokens import ADMIN, TOKEN_PREFIX, Caller
from gleaner.store.backends.dberrors import DatabaseRefused, is_permanent
from gleaner.store.feeds.references import ArticleRow
from gleaner.tenancy import scope
from gleaner.urls import canonicalize

log = logging.getLogger(__name__)

# A batch of this many articles is far past any poller run; the byte cap usually bites first.
MAX_ARTICLES = 10_000
MAX_URL_CHARS = 2048
MAX_TITLE_CHARS = 1000
MAX_SUMMARY_CHARS = 20_000
MAX_ID_CHARS = 200
MAX_SEARCH_RESULTS = 100
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$")
_ARTICLE_FIELDS = {"url", "title", "workspace_id", "published_at", "summary", "feed_source"}
_TOP_LEVEL_FIELDS = {"articles", "full_reprocess"}

Answer = tuple[int, dict[str, Any]]


@dataclass(frozen=True, slots=True)
class WebhookRequest:
    method: str
    path: str = "/"
    headers: Mapping[str, str] = field(default_factory=dict)  # keys lower-cased by the adapter
    body: bytes = b""
    query: Mapping[str, str] = field(default_factory=dict)
    # Reads the body (BodyRefused when it cannot be read as sent); called only after the bearer is
    # checked, so an unauthenticated caller costs no read. None: ``body`` is the body.
    read_body: Callable[[], bytes] | None = None


class MalformedRequest(InvalidInput):
    """A 400: the reasons are listed for the caller."""

    def __init__(self, reasons: list[str], rejected: list[dict[str, Any]] | None = None) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons
        self.rejected = rejected or []


@dataclass(frozen=True, slots=True)
class Batch:
    rows: tuple[tuple[int, ArticleRow], ...]  # (index in the request, the article)
    rejected: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Walk:
    full_reprocess: bool = False


# -- parsing: pure ---------------------------------------------------------------------------------


def parse_payload(body: bytes) -> Batch | Walk:
    """The webhook body as a batch of articles or a walk nudge; MalformedRequest says why not."""
    if not body.strip():
        return Walk()
    try:
        data = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise MalformedRequest([f"body is not UTF-8: {exc}"]) from exc
    except (ValueError, RecursionError) as exc:
        raise MalformedRequest([f"body is not JSON: {exc}"]) from exc
    problem = text_problem(data)
    if problem:
        raise MalformedRequest([f"body {problem}"])
    if not isinstance(data, dict):
        raise MalformedRequest([f"body must be a JSON object, got {_type(data)}"])
    unknown = sorted(set(data) - _TOP_LEVEL_FIELDS)
    if unknown:
        raise MalformedRequest([f"unknown field {name!r} (expected 'articles' or 'full_reprocess')"
                                for name in unknown])
    full = data.get("full_reprocess", False)
    if not isinstance(full, bool):
        raise MalformedRequest([f"'full_reprocess' must be true or false, got {_type(full)}"])
    if "articles" not in data:
        return Walk(full_reprocess=full)
    if full:
        raise MalformedRequest(["'full_reprocess' is a walk option; send it without 'articles'"])
    articles = data["articles"]
    if not isinstance(articles, list):
        raise MalformedRequest([f"'articles' must be a list, got {_type(articles)}"])
    if len(articles) > MAX_ARTICLES:
        raise MalformedRequest([f"'articles' lists {len(articles)} articles, more than {MAX_ARTICLES}"])
    rows: list[tuple[int, ArticleRow]] = []
    rejected: list[dict[str, Any]] = []
    for index, raw in enumerate(articles):
        try:
            rows.append((index, parse_article(raw)))
        except InvalidInput as exc:
            rejected.append({"index": index, "reason": str(exc)})
    if articles and not rows:
        raise MalformedRequest([f"no valid article among {len(articles)}"], rejected)
    return Batch(tuple(rows), tuple(rejected))


def parse_article(raw: object) -> ArticleRow:
    """One article object; InvalidInput names every problem with it."""
    if not isinstance(raw, dict):
        raise InvalidInput(f"an article must be an object, got {_type(raw)}")
    problems: list[str] = []
    for name in sorted(set(raw) - _ARTICLE_FIELDS):
        problems.append(f"unknown field {name!r}")
    url = _required_text(raw, "url", MAX_URL_CHARS, problems)
    title = _required_text(raw, "title", MAX_TITLE_CHARS, problems)
    workspace = _required_text(raw, "workspace_id", MAX_ID_CHARS, problems)
    summary = _optional_text(raw, "summary", MAX_SUMMARY_CHARS, problems)
    feed_source = _optional_text(raw, "feed_source", MAX_URL_CHARS, problems)
    published = _optional_time(raw, "published_at", problems)
    normalised = None
    if url is not None:
        try:
            normalised = canonicalize(url)
        except InvalidInput as exc:
            problems.append(f"'url' is not a usable http(s) URL: {exc}")
    if problems:
        raise InvalidInput("; ".join(problems))
    assert url is not None and normalised is not None and title is not None and workspace is not None
    return ArticleRow(workspace_id=workspace, external_url=url, normalised_url=normalised, title=title,
                      summary=summary, published_at=published, feed_source=feed_source)


def _type(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _required_text(raw: dict[str, Any], name: str, limit: int, problems: list[str]) -> str | None:
    if name not in raw:
        problems.append(f"missing field {name!r}")
        return None
    value = raw[name]
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{name!r} must be a non-empty string, got {_type(value)}")
        return None
    if len(value) > limit:
        problems.append(f"{name!r} is longer than {limit} characters")
        return None
    return value.strip()


def _optional_text(raw: dict[str, Any], name: str, limit: int, problems: list[str]) -> str | None:
    value = raw.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        problems.append(f"{name!r} must be a string or null, got {_type(value)}")
        return None
    if len(value) > limit:
        problems.append(f"{name!r} is longer than {limit} characters")
        return None
    return value.strip() or None


def _optional_time(raw: dict[str, Any], name: str, problems: list[str]) -> datetime | None:
    value = raw.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not _RFC3339.match(value):
        problems.append(f"{name!r} must be an RFC 3339 date-time with an offset (or null), got {value!r}"[:300])
        return None
    try:
        return datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError as exc:
        problems.append(f"{name!r} is not a valid date-time: {exc}")
        return None


# -- handling -------------------------------------------------------------------------------------


def handle(request: WebhookRequest, deps: Deps) -> Answer:
    """Answer one request: (HTTP status, JSON object)."""
    path = "/" + request.path.strip("/")
    method = request.method.upper()
    if path == "/":
        allowed: tuple[str, ...] = ("POST",)
    elif path == "/refs" or path.startswith("/refs/") or path.startswith("/v1/texts/"):
        allowed = ("GET", "HEAD")
    else:
        return 404, {"error": f"no route {path}"}
    if method not in allowed:
        return 405, {"error": f"method {method} not allowed on {path}", "allow": list(allowed)}
    # A text is read by the operator, a workspace or a site token (textsapi.py); the rest by the first two.
    caller = (_text_reader(request.headers, deps) if path.startswith("/v1/texts/")
              else _caller(request.headers, deps))
    if not isinstance(caller, Caller | TextReader):
        return caller
    try:
        problem = text_problem([path, *request.query.keys(), *request.query.values()])
        if problem:
            raise MalformedRequest([f"the path or query {problem}"])
        if isinstance(caller, TextReader):
            return text_slice(deps, path[len("/v1/texts/"):], request.query, caller)
        from gleaner.references.identity import REFERENCES_SITE

        # Feed articles, reference items and the quality log are the references tenant's rows
        # (row-level security): every other route acts for it.
        with scope(REFERENCES_SITE):
            if path == "/":
                try:
                    body = request.read_body() if request.read_body is not None else request.body
                except BodyRefused as exc:
                    return exc.status, {"error": exc.message}
                return _post(body, deps, caller)
            if path == "/refs":
                return _search(request.query, deps, caller)
            return _show(path[len("/refs/"):], deps, caller)
    except MalformedRequest as exc:
        answer: dict[str, Any] = {"error": "malformed request", "reasons": exc.reasons}
        if exc.rejected:
            answer["rejected"] = exc.rejected
        return 400, answer
    except DatabaseRefused as exc:
        if is_permanent(exc):
            # The database refused the input itself (a value it cannot store): retrying cannot help.
            log.warning("webhook input refused by the database: %s", exc)
            return 400, {"error": "malformed request", "reasons": ["the database refused a value in the request"]}
        log.error("webhook could not finish: %s", exc)
        return 503, {"error": "temporarily unavailable, retry later"}
    except RetryableError as exc:
        # Transient: the caller retries; whatever was recorded before stays recorded (duplicates on resend).
        log.error("webhook could not finish: %s", exc)
        return 503, {"error": "temporarily unavailable, retry later"}


def _caller(headers: Mapping[str, str], deps: Deps) -> Caller | Answer:
    """Who the bearer acts for: the admin (the shared secret) or a token's workspace; else the refusal."""
    secret = deps.settings.webhook_secret
    if not secret:
        # Fail closed: an unconfigured webhook must not be an open one (500, like the map function's).
        log.error("GLEANER_WEBHOOK_SECRET is not set: refusing every webhook request")
        return 500, {"error": "the webhook secret is not configured"}
    token = bearer_token(headers.get("authorization", ""))
    if token is None:
        return 401, {"error": "missing bearer token"}
    if secret_matches(token, secret):
        return ADMIN
    if token.startswith(TOKEN_PREFIX) and len(token) < 100:
        caller = deps.tokens.caller_for(token)
        if caller is not None:
            return caller
    return 401, {"error": "wrong bearer token"}


def _text_reader(headers: Mapping[str, str], deps: Deps) -> TextReader | Answer:
    """Who reads a text: the admin (the operator), a workspace token, or a site token (its site)."""
    caller = _caller(headers, deps)
    if isinstance(caller, Caller):
        return TextReader.operator() if caller.workspace_id is None else TextReader.workspace(caller.workspace_id)
    token = bearer_token(headers.get("authorization", ""))
    if caller[0] == 401 and token and token.startswith(TOKEN_PREFIX) and len(token) < 100:
        site = deps.tokens.site_token(token)
        if site is not None:
            return TextReader.site(site.site_domain)
    return caller


def _post(body: bytes, deps: Deps, caller: Caller) -> Answer:
    payload = parse_payload(body)
    if isinstance(payload, Walk) and payload.full_reprocess and not caller.is_admin:
        # A full reprocess re-fetches every workspace's passed URLs: one workspace's token must not make
        # Gleaner re-fetch everyone's, as often as it likes (issue 26). The plain walk stays open to all.
        return 403, {"error": "a full reprocess re-fetches every workspace's URLs: only the operator "
                              "(GLEANER_WEBHOOK_SECRET) may ask for it"}
    if isinstance(payload, Walk):
        refs = deps.references
        scheduled = len(refs.pending(full_reprocess=payload.full_reprocess))
        deps.bus.publish(ArticlesAccepted(walk=True, full_reprocess=payload.full_reprocess))
        log.info(json.dumps({"event": "webhook.walk", "scheduled": scheduled,
                             "full_reprocess": payload.full_reprocess}))
        return 202, {"walk": True, "scheduled": scheduled}
    if not caller.is_admin:
        payload = _own_workspace_only(payload, caller)
    # An erased page's URL is refused at the door (seed 004: the blocklist before every dedup path).
    from gleaner.references.identity import REFERENCES_SITE

    with scope(REFERENCES_SITE):  # the blocklist is per tenant; feed articles belong to Gleaner's own
        erased = deps.blocklist.refused(REFERENCES_SITE, {index: (row.normalised_url.encode("utf-8"),)
                                                          for index, row in payload.rows})
    rejected = sorted([*payload.rejected, *({"index": i, "reason": "erased"} for i in erased)],
                      key=lambda r: int(r["index"]))
    ids = deps.references.record_articles([row for index, row in payload.rows if index not in erased])
    new = [i for i in ids if i is not None]
    if new:
        # Rows are committed before the publish: if the publish fails, the 503 makes the poller resend
        # (duplicates now) and the next walk lands them. Nothing accepted is lost.
        deps.bus.publish(ArticlesAccepted(article_ids=tuple(new)))
    answer = {"accepted": len(new), "duplicates": len(ids) - len(new), "rejected": rejected}
    log.info(json.dumps({"event": "webhook.articles", **{k: v for k, v in answer.items() if k != "rejected"},
                         "rejected": len(rejected)}))
    return 202, answer


def _search(query: Mapping[str, str], deps: Deps, caller: Caller) -> Answer:
    """Ranked previews of the caller's reference items: a workspace's own feed's, or (the admin) all."""
    text = (query.get("q") or "").strip()
    if not text:
        raise MalformedRequest(["query parameter 'q' is required"])
    raw_limit = query.get("limit") or "20"
    if not (raw_limit.isascii() and raw_limit.isdigit()) or not 1 <= int(raw_limit) <= MAX_SEARCH_RESULTS:
        raise MalformedRequest([f"'limit' must be an integer from 1 to {MAX_SEARCH_RESULTS}"])
    from gleaner.retrieval.references import search_references

    return 200, {"query": text, "results": search_references(deps, text, int(raw_limit), caller.workspace_id)}


def _own_workspace_only(batch: Batch, caller: Caller) -> Batch:
    """A workspace token records articles for its own workspace only; others are rejected one by one."""
    rows, rejected = [], list(batch.rejected)
    for index, row in batch.rows:
        if row.workspace_id == caller.workspace_id:
            rows.append((index, row))
        else:
            rejected.append({"index": index, "reason": "'workspace_id' is not the workspace of this token"})
    if not rows:
        raise MalformedRequest([f"no valid article among {len(rows) + len(rejected)}"],
                               sorted(rejected, key=lambda r: r["index"]))
    return Batch(tuple(rows), tuple(sorted(rejected, key=lambda r: r["index"])))


def _show(raw_id: str, deps: Deps, caller: Caller) -> Answer:
    try:
        reference_id = str(uuid.UUID(raw_id))
    except ValueError as exc:
        raise MalformedRequest([f"{raw_id[:100]!r} is not a reference id (a UUID)"]) from exc
    item = deps.references.get(reference_id)
    if item is None:
        return 404, {"error": f"no reference item {reference_id}"}
    if not caller.is_admin:
        # A workspace sees its own ledger rows; the others only as counts (no ids, no feed URLs).
        others = [a for a in item["articles"] if a["workspace_id"] != caller.workspace_id]
        item["articles"] = [a for a in item["articles"] if a["workspace_id"] == caller.workspace_id]
        item["other_workspaces"] = {"workspaces": len({a["workspace_id"] for a in others}),
                                    "articles": len(others)}
    return 200, item
