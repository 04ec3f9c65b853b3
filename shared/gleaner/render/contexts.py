"""Browser contexts kept apart per site: one site's pages never see another's storage.

A browser context is Chromium's profile in miniature: cookies, localStorage, IndexedDB, the cache
and service-worker registrations live in it. One context shared by every render would let a page
of one site read what a page of another site (or of another tenant crawling it) left there, and
let one site's state steer how the next site's page renders. So each site gets its own context,
keyed by the tenant the render acts for and the page's origin, and a page is reused only within its
site's context (contexts are cheap; a page costs more to open). The least recently used idle
context is closed once more than ``keep`` are open, and its storage goes with it.
"""

from __future__ import annotations

import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page

log = logging.getLogger(__name__)

# Sites whose contexts stay open while idle: a run renders one site's pages, a render service
# instance a few runs' at once.
KEEP_CONTEXTS = 4


@dataclass(frozen=True, slots=True)
class SiteKey:
    """Whose storage a context holds: the tenant the render acts for, and the page's origin."""

    tenant: str | None
    origin: str

    @classmethod
    def of(cls, url: str, tenant: str | None) -> SiteKey:
        parts = urlsplit(url)
        return cls(tenant, f"{parts.scheme.lower()}://{(parts.hostname or '').lower()}:{parts.port or ''}")


@dataclass(slots=True)
class _Site:
    context: BrowserContext
    idle: list[Page] = field(default_factory=list)
    busy: int = 0


class SiteContexts:
    """Contexts by :class:`SiteKey`, each with its idle pages. All calls run on the fetch loop."""

    def __init__(self, open_context: Callable[[], Awaitable[BrowserContext]],
                 open_page: Callable[[BrowserContext], Awaitable[Page]], keep: int = KEEP_CONTEXTS) -> None:
        self._open_context = open_context
        self._open_page = open_page
        self._keep = keep
        self._sites: OrderedDict[SiteKey, _Site] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sites)

    async def page(self, key: SiteKey) -> Page:
        """An idle page of the site's context, or a new one (in a new context for a new site)."""
        site = self._sites.get(key)
        if site is None:
            site = self._sites[key] = _Site(await self._open_context())
        self._sites.move_to_end(key)
        site.busy += 1
        try:
            return site.idle.pop() if site.idle else await self._open_page(site.context)
        except BaseException:
            site.busy -= 1
            raise
        finally:
            await self._close_idle_beyond_keep()

    def put_back(self, key: SiteKey, page: Page | None) -> None:
        """The site's page is done with: kept for its next render, or None when it was closed."""
        site = self._sites.get(key)
        if site is None:
            return
        site.busy -= 1
        if page is not None:
            site.idle.append(page)

    async def close(self) -> None:
        sites, self._sites = list(self._sites.values()), OrderedDict()
        for site in sites:
            await _close(site.context)

    async def _close_idle_beyond_keep(self) -> None:
        for key in [k for k, s in self._sites.items() if not s.busy][:max(0, len(self._sites) - self._keep)]:
            await _close(self._sites.pop(key).context)


async def _close(context: BrowserContext) -> None:
    from playwright.async_api import Error as PlaywrightError

    with contextlib.suppress(PlaywrightError):
        await context.close()
