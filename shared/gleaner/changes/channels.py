"""Notification channels through Apprise (Slack, Teams workflows, Discord, e-mail, Telegram, JSON …).

A subscription URL is a *channel* when Apprise names a service for it: its own schemes (``slack://``,
``mailto://``, ``json://`` …) and the http(s) URLs services hand out (a Slack or Discord webhook URL).
Any other http(s) URL is a Standard Webhooks subscription (:mod:`gleaner.changes.delivery`).

The address policy holds for channels as for webhooks, in two places:

- **where**: :func:`targets` names the hosts a service connects to (the URL's own host for
  self-hosted ones: JSON/XML/form, Teams workflows; the SMTP server for e-mail; the fixed API hosts
  of Slack, Discord and Telegram). Every address they resolve to must be allowed, when the
  subscription is added and before every attempt. A service whose hosts cannot be named this way
  is refused (:data:`SUPPORTED`).
- **the socket**: the send runs inside :func:`gleaner.changes.netguard.guarded`, which answers the
  plugin's lookups with checked addresses only and refuses any connection to another address.

Apprise's own URL masking (``url(privacy=True)``) is what listings show (:func:`masked`); errors
and logs pass through :func:`redact`, which removes every piece of the URL the masked form hides.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from gleaner.changes import netguard
from gleaner.errors import PolicyRefused
from gleaner.fetch.addresses import AddressRefused, IPNetwork, Resolver, check_answers, lookup
from gleaner.store.notifications.deliveries import Response

if TYPE_CHECKING:
    from apprise.plugins.base import NotifyBase

# Services whose network targets gleaner can name, by how: the URL's host, the SMTP server, or the
# service's fixed API hosts (its ``*_url`` class attributes).
OWN_HOST = frozenset({"json", "jsons", "xml", "xmls", "form", "forms", "workflow", "workflows"})
EMAIL = frozenset({"mailto", "mailtos"})
FIXED_HOSTS = frozenset({"slack", "discord", "tgram"})
SUPPORTED = OWN_HOST | EMAIL | FIXED_HOSTS
# Class attributes of a service naming pages for people, not endpoints it sends to.
_NOT_ENDPOINTS = frozenset({"service_url", "setup_url", "image_url", "app_url"})


def _schemes(plugin: NotifyBase) -> set[str]:
    found: set[str] = set()
    for attr in ("protocol", "secure_protocol"):
        value = getattr(plugin, attr, None) or ()
        found.update([value] if isinstance(value, str) else value)
    return {s.lower() for s in found}


def is_service_webhook(url: str) -> bool:
    """Whether an http(s) URL is one a service hands out (a Slack or Discord webhook URL).

    Asked of each service's own native-URL matcher, never of Apprise's URL parser: that one logs
    "ERROR apprise: Unparseable URL" for every plain webhook, on each add, listing and delivery."""
    from apprise.plugins import N_MGR

    escaped = url.replace("/#", "/%23")  # as Apprise passes a URL to the matchers
    return any(plugin.parse_native_url(escaped) for plugin in N_MGR.plugins()
               if hasattr(plugin, "parse_native_url"))


def instantiate(url: str) -> NotifyBase | None:
    """The Apprise service for url, or None (not a channel, or not a valid one).

    A plain http(s) webhook is answered here (None) before Apprise sees it."""
    import apprise

    scheme = url.partition(":")[0].lower()
    if scheme in ("http", "https") and not is_service_webhook(url):
        return None
    logging.getLogger("apprise").setLevel(logging.WARNING)  # its debug lines spell out URL pieces
    return apprise.Apprise.instantiate(url)


def is_channel(url: str) -> bool:
    """Whether url is sent through Apprise (else: a Standard Webhooks URL if it is http(s))."""
    return instantiate(url) is not None  # an http(s) URL: a service's own webhook URL (Slack, Discord …)


def targets(plugin: NotifyBase) -> list[tuple[str, int]]:
    """The (host, port) pairs the service connects to; PolicyRefused when gleaner cannot name them."""
    schemes = _schemes(plugin)
    secure = bool(getattr(plugin, "secure", False))
    if schemes & OWN_HOST:
        host = str(getattr(plugin, "host", "") or "")
        return [(host, int(getattr(plugin, "port", None) or (443 if secure else 80)))] if host else []
    if schemes & EMAIL:
        host = str(getattr(plugin, "smtp_host", "") or getattr(plugin, "host", "") or "")
        return [(host, int(getattr(plugin, "port", None) or 25))] if host else []
    if schemes & FIXED_HOSTS:
        found: dict[tuple[str, int], None] = {}
        for cls in type(plugin).__mro__:
            for name, value in vars(cls).items():
                if (name.endswith("_url") and name not in _NOT_ENDPOINTS and isinstance(value, str)
                        and value.startswith("https://")):
                    host = urlsplit(value).hostname or ""
                    if host and "{" not in host:
                        found[(host, 443)] = None
        return list(found)
    raise PolicyRefused(f"gleaner cannot tell which hosts the {sorted(schemes)[0]}:// service connects to, so"
                        f" it cannot hold it to the address policy; supported: {', '.join(sorted(SUPPORTED))}")


def check(url: str, allow: tuple[IPNetwork, ...], resolver: Resolver | None = None) -> NotifyBase:
    """The channel's service, once every address its targets resolve to passes the policy; PolicyRefused."""
    plugin = instantiate(url)
    if plugin is None:
        raise PolicyRefused(f"not a notification URL Apprise understands: {masked(url)}")
    hosts = targets(plugin)
    if not hosts:
        raise PolicyRefused(f"refused notification target {masked(url)}: it names no host")
    for host, port in hosts:
        try:
            answers = lookup(host, port, resolver or netguard.system_lookup)
        except (OSError, UnicodeError) as exc:
            raise PolicyRefused(f"refused notification target {masked(url)}: cannot resolve {host}: {exc}") from exc
        verdict = check_answers(host, answers, allow)
        if isinstance(verdict, AddressRefused):
            raise PolicyRefused(f"refused notification target {masked(url)}: {verdict.reason}")
    return plugin


def masked(url: str) -> str:
    """What listings show: Apprise's privacy form of a channel; a webhook URL with its query values hidden."""
    scheme = url.partition(":")[0].lower()
    plugin = None
    try:
        plugin = instantiate(url) if "://" in url else None
    except Exception:
        plugin = None
    if plugin is not None:
        return str(plugin.url(privacy=True)).partition("?")[0]
    if scheme in ("http", "https"):
        try:
            parts = urlsplit(url)
        except ValueError:
            return f"{scheme}://****"
        netloc = parts.netloc.rpartition("@")[2]
        query = "&".join(f"{p.partition('=')[0]}=****" if "=" in p else p for p in parts.query.split("&") if p)
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    return f"{scheme}://****"


def redact(text: str, url: str) -> str:
    """text without any piece of url that its masked form hides (tokens, passwords, query values)."""
    shown = masked(url)
    scheme = url.partition(":")[0].lower()
    # Apprise's masked form of a service's webhook URL drops its host (hooks.slack.com): not a secret.
    public = {scheme, "https", "http", "services"}
    if scheme in ("http", "https"):
        public.add((urlsplit(url).hostname or "").lower())
    pieces = {p for p in re.split(r"[/:@?&=#]+", url) if len(p) >= 4 and p not in shown and p.lower() not in public}
    for piece in sorted(pieces, key=len, reverse=True):
        text = text.replace(piece, "****")
    return text


class _ThreadLines(logging.Handler):
    """Apprise's warnings on this thread: the only account of why a service refused a message."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread = threading.get_ident()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.lines.append(record.getMessage())


class _Redact(logging.Filter):
    """Apprise's records from this thread, with the URL's secrets removed before any handler sees them."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread == self.thread:
            record.msg, record.args = redact(record.getMessage(), self.url), ()
        return True


@contextmanager
def _apprise_warnings(url: str) -> Iterator[list[str]]:
    handler, redacting = _ThreadLines(), _Redact(url)
    logger = logging.getLogger("apprise")
    logger.addFilter(redacting)
    logger.addHandler(handler)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)
        logger.removeFilter(redacting)


def send(url: str, title: str, body: str, *, allow: tuple[IPNetwork, ...], timeout: float,
         resolver: Resolver | None = None) -> Response:
    """Send one message through the channel under the address policy; never raises.

    Apprise reports success or failure, not an HTTP status: a sent message is ``Response(None, None)``.
    """
    from apprise import NotifyFormat

    started = time.monotonic()

    def failed(reason: str) -> Response:
        return Response(None, redact(reason, url)[:500], int((time.monotonic() - started) * 1000))

    try:
        plugin = check(url, allow, resolver)
    except PolicyRefused as exc:
        return failed(str(exc))
    plugin.socket_connect_timeout = plugin.socket_read_timeout = timeout
    sent = False
    with _apprise_warnings(url) as lines, netguard.guarded(allow, resolver) as guard:
        try:
            sent = bool(plugin.notify(body=body, title=title, body_format=NotifyFormat.MARKDOWN))
        except Exception as exc:
            lines.append(f"{type(exc).__name__}: {exc}")
    if sent and not guard.refusals:
        return Response(None, None, int((time.monotonic() - started) * 1000))
    reasons: list[Any] = [f"refused by the address policy: {r}" for r in guard.refusals] or lines
    return failed("; ".join(map(str, reasons)) or "the service did not accept the message")
