"""One HTTP exchange of the fetcher: a request sent, its answer judged and its body read.

Split from :mod:`gleaner.fetch.fetcher` (robots.txt, redirects) and :mod:`gleaner.fetch.admission`
(address policy, politeness), which decide *whether* and *when* to ask; this module is what happens
on the wire once they do.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import aiohttp

from gleaner.fetch.addresses import CheckedUrl
from gleaner.fetch.body import BodyReader, BodyRefused, coding_of
from gleaner.fetch.budget import RunBudget
from gleaner.fetch.judgement import Refusal, accept_header, judge_headers, judge_sniffed, judge_status
from gleaner.fetch.neterrors import describe
from gleaner.fetch.types import FetchOutcome, FetchRequest, FetchResult
from gleaner.settings.config import Settings


async def exchange(session: aiohttp.ClientSession, settings: Settings, budget: RunBudget, request: FetchRequest,
                   target: CheckedUrl, *, max_bytes: int | None, robots: bool) -> FetchResult:
    """One GET of ``target`` (already checked, redirects not followed) judged into a result: status,
    headers, then a body read under the byte caps and the run's budget, all under one deadline."""
    started = time.monotonic()
    fetch_deadline = started + settings.fetch_timeout
    run_deadline = budget.deadline
    deadline = min(fetch_deadline, run_deadline) if run_deadline is not None else fetch_deadline
    run_cut = run_deadline is not None and run_deadline <= fetch_deadline
    headers = {"Accept": "*/*" if robots else accept_header(request.accept)}
    if request.etag:
        headers["If-None-Match"] = request.etag
    if request.last_modified:
        headers["If-Modified-Since"] = request.last_modified
    meta: dict[str, object] = {"final_url": target.text, "key": request.key}

    def done(outcome: FetchOutcome, reason: str, **kw: object) -> FetchResult:
        values = {**meta, **kw, "elapsed_ms": int((time.monotonic() - started) * 1000)}
        return FetchResult(request.url, outcome, reason, **values)  # type: ignore[arg-type]

    where = "before the response"
    try:
        # One total deadline for connect, TLS, headers and body: a server dripping a byte a second
        # never resets it (a per-read timeout would restart with every chunk).
        async with asyncio.timeout_at(deadline):  # the loop's clock is time.monotonic
            async with session.get(target.wire, headers=headers, allow_redirects=False) as response:
                where = "while reading the body"
                response_headers = lowered(response)
                meta.update(status=response.status, headers=response_headers,
                            etag=response_headers.get("etag"), last_modified=response_headers.get("last-modified"))
                outcome = judge_status(request, response.status, robots)
                if outcome is not None:
                    return done(*outcome)
                limit = max_bytes or settings.max_body_bytes
                readable = judge_headers(request, response_headers, target.text, limit=limit, robots=robots)
                if isinstance(readable, Refusal):
                    return done(readable.outcome, readable.reason, content_type=readable.content_type)
                reader = BodyReader(coding=coding_of(response_headers.get("content-encoding")), max_wire=limit,
                                    max_decoded=limit if robots else settings.max_decompressed_bytes,
                                    on_wire=lambda count: _charge(budget, count))
                async for chunk in response.content.iter_any():
                    reader.feed(chunk)
                body, wire = reader.finish()
    except BodyRefused as exc:
        outcome_for = {"size": FetchOutcome.REFUSED_SIZE, "content": FetchOutcome.REFUSED_CONTENT,
                       "budget": FetchOutcome.EXHAUSTED}
        return done(outcome_for[exc.kind], exc.reason)
    except TimeoutError:
        if run_cut and time.monotonic() >= deadline - 0.01:
            return done(FetchOutcome.EXHAUSTED, f"run time budget of {settings.run_max_seconds:g}s spent "
                                                f"{where}")
        return done(FetchOutcome.UNAVAILABLE, f"timeout {where} (limit {settings.fetch_timeout:g}s)")
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        detail = "error while reading the body: " if where != "before the response" else ""
        return done(FetchOutcome.UNAVAILABLE, f"network: {detail}{describe(exc)}")
    if readable.kind is None:
        sniffed = judge_sniffed(body)
        if isinstance(sniffed, Refusal):
            return done(sniffed.outcome, sniffed.reason)
        readable = replace(sniffed, charset=readable.charset)
    return done(FetchOutcome.FETCHED, "", content_type=readable.content_type, charset=readable.charset,
                kind=readable.kind, body=body, wire_bytes=wire)


def _charge(budget: RunBudget, count: int) -> None:
    reason = budget.add_bytes(count)
    if reason is not None:
        raise BodyRefused("budget", reason)


def lowered(response: aiohttp.ClientResponse) -> dict[str, str]:
    """Response headers by lower-case name; a repeated header's values joined as RFC 9110 allows."""
    headers: dict[str, str] = {}
    for name, value in response.headers.items():
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return headers
