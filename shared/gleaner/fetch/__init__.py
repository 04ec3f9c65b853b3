"""Fetching safely and politely: every request Gleaner makes goes through :class:`fetcher.Fetcher`.

Modules, one concern each:

* ``fetcher``   — the orchestration: robots first, redirects, outcomes, many requests at once
* ``admission`` — one hop: address policy, the host's turn (politeness, shared turns), budget, backoff
* ``exchange``  — one HTTP exchange on the wire: the request sent, its answer judged, its body read
* ``judgement`` — what a status, content type, body start or Retry-After means (pure)
* ``addresses`` — which URLs and IP addresses may be reached; resolve-once pins
* ``transport`` — the aiohttp session that connects only to pinned addresses
* ``loop``      — the one event-loop thread per process every fetch coroutine runs on
* ``neterrors`` — network failures in words a person can act on
* ``robots``    — RFC 9309 parsing and matching (pure)
* ``body``      — reading a body under wire and decoded caps (pure)
* ``budget``    — the run's budget of requests, bytes and time
* ``politeness`` — per-host concurrency slots and delays, shared by a process's fetchers
* ``types``     — FetchRequest, FetchResult and the FetchOutcome every URL ends with

The operator-facing guarantees are in ``docs/fetcher.md``.
"""
