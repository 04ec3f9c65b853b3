"""The words a person reads for each code Gleaner stores: one reviewed table for the back office and
the command line's human output (JSON and the API keep the codes).

A code not listed here reads as itself with ``_`` and ``-`` as spaces, so a new code is never hidden;
add it here to say it better. Failed runs' errors are explained in words by :func:`explain_error`.
"""

from __future__ import annotations

import re

# (code, words), grouped by what the code is; codes are unique across groups or mean the same in each.
_RUN_STATUS = {
    "queued": "queued", "mapping": "finding pages", "mapped": "pages found", "sampling": "sampling pages",
    "scraping": "fetching pages", "finished": "finished", "partial": "partial", "failed": "failed",
    "cancelled": "cancelled", "interrupted": "interrupted",
}
_DOCUMENT_STATUS = {
    "discovered": "found, not fetched yet", "active": "current", "blocked": "blocked", "stale": "gone from the site",
    "superseded": "replaced", "erased": "erased",
}
_SCRAPE_POLICY = {"scrape": "fetched", "skip": "skipped"}
_CHANGE_SIGNAL = {
    "etag_changed": "the server's ETag changed", "lastmod_changed": "its last-modified date changed",
    "hash_changed": "its text changed", "jsonld_changed": "its structured data changed",
    "forced": "fetched again on request",
}
_COMPOSITE_STATUS = {
    "generated": "generated", "in_validation": "in validation", "edited": "edited", "validated": "validated",
    "staged": "staged", "prod": "in production",
}
_CONFLICT = {
    "open": "open", "acknowledged": "acknowledged", "resolved": "resolved", "false_positive": "not a conflict",
    "duplicate": "duplicate", "contradiction": "contradiction", "factual_contradiction": "contradiction",
    "stale_info": "out of date", "policy_mismatch": "against policy",
}
_DECISION = {
    "unlabeled": "not decided yet", "include": "included", "exclude": "excluded", "needs_review": "waiting for review",
    "pending": "waiting to be fetched", "not-attempted": "not fetched (the run ended first)",
}
_FETCH_OUTCOME = {
    "fetched": "fetched", "not-modified": "not modified", "robots-denied": "refused by robots.txt",
    "robots-unknown": "robots.txt could not be read", "refused-size": "too large",
    "refused-content": "not a page Gleaner keeps", "redirect-refused": "redirected somewhere refused",
    "denied": "refused by the address policy", "unavailable": "the site did not serve it",
    "exhausted": "left by the run's budget", "store-failed": "could not be stored",
    "refused-erased": "erased (refused)", "replayed": "replayed from the store",
}
_EVENT = {
    "document.new": "new page", "document.changed": "changed", "document.removed": "removed",
    "document.restored": "back again", "document.stale": "gone stale", "document.blocked": "blocked",
    "document.unblocked": "unblocked", "conflict.opened": "conflict found", "routing.handover": "handed over",
    "run.finished": "run finished", "run.partial": "run partial", "run.failed": "run failed",
    "notify.digest": "digest", "webhook.test": "test message",
}
# A subscription's own states (active, disabled) are words already, and "active" is a document's "current".
_DELIVERY = {"pending": "waiting", "delivered": "delivered", "cancelled": "cancelled"}
_ROUTING = {"rag": "search", "skill": "skill", "config": "configuration"}
_RENDER = {"plain_fetch": "plain fetch", "browser": "in a browser", "sandbox": "sandboxed", "never": "never",
           "auto": "when needed", "always": "always"}
_SNAPSHOT = {"new": "new", "changed": "changed", "unchanged": "unchanged"}

WORDS: dict[str, str] = {}
for _group in (_RUN_STATUS, _DOCUMENT_STATUS, _SCRAPE_POLICY, _CHANGE_SIGNAL, _COMPOSITE_STATUS, _CONFLICT,
               _DECISION, _FETCH_OUTCOME, _EVENT, _DELIVERY, _ROUTING, _RENDER, _SNAPSHOT):
    WORDS.update(_group)


def words(code: object) -> str:
    """What ``code`` means in words ("hash_changed" -> "its text changed"); "" for no code."""
    if code is None or code == "":
        return ""
    text = str(code)
    if text in WORDS:
        return WORDS[text]
    if text.startswith("not-fetched (") and text.endswith(")"):
        return f"not fetched ({words(text[13:-1])})"
    return text.replace("_", " ").replace("-", " ")


# Errors as the network library words them -> what happened, for a person.
_ERRORS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p, re.IGNORECASE), w) for p, w in (
    (r"Name or service not known|nodename nor servname|getaddrinfo failed|No address associated|"
     r"Temporary failure in name resolution|cannot resolve", "the host name could not be found (is it spelled right?)"),
    (r"Connection refused|ECONNREFUSED", "the host refused the connection (nothing listens there)"),
    (r"timed out|timeout", "the host did not answer in time"),
    (r"certificate|SSL|TLS", "the site's secure connection (TLS certificate) could not be checked"),
    (r"Network is unreachable|No route to host", "the host could not be reached from here"),
))


# Reasons recorded as ``key=value (why)`` -> words.
_POLICY_REASON = re.compile(r"scrape_policy=(\w+)(?: \(([^)]*)\))?")
_ERRNO = re.compile(r"\w*Error: |\[Errno -?\d+\] ")


def explain_error(error: str | None) -> str:
    """A run's or a page's error or reason in words (the original stays in the JSON and the title)."""
    if not error:
        return ""
    for pattern, said in _ERRORS:
        if pattern.search(error):
            return said
    policy = _POLICY_REASON.search(error)
    if policy:
        why = policy.group(2)
        return f"{words(policy.group(1))}" + (f" ({words(why)})" if why else "")
    return _ERRNO.sub("", error)


def page_url(url: object) -> str:
    """A page's address as shown: an erased page's stored form (``erased:<digest>``) is no address."""
    text = "" if url is None else str(url)
    return "(an erased page)" if text.startswith("erased:") else text


def cannot_resume_because(error: str | None) -> str | None:
    """Why resuming or replaying a failed run cannot help, in words (None: it may)."""
    if error and any(p.search(error) for p, _ in _ERRORS[:1]):
        return "the host name could not be found: fix the site's address and crawl it again"
    return None
