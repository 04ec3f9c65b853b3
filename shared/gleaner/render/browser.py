"""One warm headless Chromium per process, every request of its pages answered by the Fetcher.

Playwright's asyncio API runs on the process's fetch loop (:mod:`gleaner.fetch.loop`), so a page's
requests are answered by the Fetcher's own coroutines (politeness semaphores belong to that loop)
and any thread may render. The browser is launched on the first page that needs it, never at import
or start-up, and stays up; pages are kept and reused between renders.

For one page: the document the scrape already fetched is handed to the browser as the answer to its
navigation (it is not asked for twice); every further request goes through :class:`~.gate.PageAllowance`
and then the Fetcher, and its answer (or refusal) is recorded. The page is read once it has been
quiet for a moment (no request in flight), after a few scrolls for pages that load more on scroll,
or when its time budget runs out, whichever comes first. Playwright's errors become a
:class:`Rendering` with outcome ``failed``; nothing here raises for a page. Each site (tenant and
origin) renders in a browser context of its own (:mod:`.contexts`), so no page sees the storage
another site's pages left.

The Fetcher's answer travels without ``Set-Cookie`` (Gleaner keeps no cookies) and with the
Fetcher's decoded body. Service workers are blocked, downloads refused, pop-ups closed at once,
WebSockets closed, no permission granted, dialogs dismissed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from typing import TYPE_CHECKING, Any

from gleaner import tenancy
from gleaner.fetch import loop
from gleaner.fetch.types import ContentKind, FetchOutcome, FetchRequest, FetchResult
from gleaner.render.contexts import SiteContexts, SiteKey
from gleaner.render.gate import Limits, PageAllowance, Refused, SubRequest
from gleaner.render.modes import RenderOutcome
from gleaner.render.rendering import Rendering, SubFetcher

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page, Playwright, Route, WebSocketRoute

log = logging.getLogger(__name__)

CHROMIUM = "/usr/bin/chromium"
# Chromium's own network is made useless: every name resolves to nothing, and everything (loopback too:
# `<-loopback>` removes Chromium's implicit bypass) goes to a proxy that cannot be reached. A request the
# interception missed therefore fails; it never reaches a host.
NO_NETWORK_ARGS = (
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=http://gleaner-no-network.invalid:9",
    "--proxy-bypass-list=<-loopback>",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-domain-reliability",
    "--disable-sync",
    "--no-first-run",
    "--no-pings",
)
# No setuid sandbox inside containers and CI (FACTS.md); /dev/shm is small in containers.
CONTAINER_ARGS = ("--no-sandbox", "--disable-dev-shm-usage")
# A page with nothing in flight this long is taken as settled.
QUIET_SECONDS = 0.25
# Two animation frames: what the page's own handlers (scroll, a fetch's answer) do lands before them.
NEXT_FRAMES = "new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"
# Reading the DOM of a page whose budget ran out must itself be bounded (a script may spin forever).
READ_SECONDS = 3.0
# Headers a page's scripts may see from the Fetcher's answer; the body is already decoded.
PASSED_HEADERS = frozenset({"content-type", "last-modified", "etag", "cache-control", "access-control-allow-origin"})


class _PageWork:
    """The state of one page while it renders: its document, allowance, requests in flight."""

    def __init__(self, document: FetchResult, fetcher: SubFetcher, limits: Limits) -> None:
        self.document = document
        self.fetcher = fetcher
        self.allowance = PageAllowance(limits)
        self.document_served = False
        self.in_flight = 0
        self.last_activity = time.monotonic()
        self.closed = False
        self.tasks: set[asyncio.Task[Any]] = set()
        # The renderer's caller's context variables (the tenant its database writes act for): Playwright
        # calls the route handler from its own tasks, which carry the context of the browser's launch.
        self.context = contextvars.copy_context()


class BrowserRenderer:
    """Renders pages in one Chromium per process. ``render`` is synchronous; the work runs on the fetch loop."""

    def __init__(self, *, executable: str = CHROMIUM, limits: Limits | None = None, concurrency: int = 2,
                 user_agent: str | None = None) -> None:
        self.executable = executable
        self.limits = limits or Limits()
        self.user_agent = user_agent
        self._concurrency = concurrency
        self._started: asyncio.Future[Browser] | None = None  # created on the fetch loop
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._sites = SiteContexts(self._new_context, self._new_page)
        self._work: dict[Page, _PageWork] = {}
        self._slots: asyncio.Semaphore | None = None

    # -- public API ------------------------------------------------------------------------------

    def render(self, document: FetchResult, fetcher: SubFetcher, limits: Limits | None = None, *,
               run_id: str | None = None) -> Rendering:
        """Render a fetched HTML document; every further request answered by ``fetcher``. Never raises.

        (``run_id`` is for the remote renderer's service; here ``fetcher`` already belongs to the run.)"""
        return loop.run(self.render_async(document, fetcher, limits))

    async def render_async(self, document: FetchResult, fetcher: SubFetcher,
                           limits: Limits | None = None) -> Rendering:
        limits = limits or self.limits
        started = time.monotonic()
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._concurrency)
        async with self._slots:
            # The site whose storage the page may see: its origin, for the tenant the render acts for.
            key = SiteKey.of(document.final_url or document.url, tenancy.current().site_domain)
            try:
                await self._browser_started()
                page = await self._sites.page(key)
            except Exception as exc:
                log.warning("the browser could not start: %s", exc)
                return Rendering(RenderOutcome.FAILED, None, (), _ms(started), f"browser did not start: {exc}"[:300])
            started = time.monotonic()  # the page's budget starts once the browser is there, not at its launch
            work = _PageWork(document, fetcher, limits)
            self._work[page] = work
            outcome, reason, html = await self._drive(page, work, limits, started)
            work.closed = True
            for task in work.tasks:
                task.cancel()
            del self._work[page]
            self._sites.put_back(key, await self._put_back(page, healthy=outcome is RenderOutcome.RENDERED))
        return Rendering(outcome, html, tuple(work.allowance.log), _ms(started), reason)

    async def bare_page(self) -> Page:
        """A page in a context of its own with no interception at all (to show the browser has no network)."""
        await self._browser_started()
        assert self._browser is not None
        context = await self._browser.new_context()
        return await context.new_page()

    def close(self) -> None:
        """Stop the browser (tests' session end; processes otherwise keep it to their end)."""
        if self._started is not None:
            loop.run(self._close())

    # -- one page ----------------------------------------------------------------------------------

    async def _drive(self, page: Page, work: _PageWork, limits: Limits,
                     started: float) -> tuple[RenderOutcome, str, bytes | None]:
        from playwright.async_api import Error as PlaywrightError

        url = work.document.final_url or work.document.url
        outcome, reason = RenderOutcome.RENDERED, ""
        try:
            async with asyncio.timeout_at(started + limits.seconds):
                await page.goto(url, wait_until="load")
                await self._quiet(work)
                await self._scroll(page, work, limits)
        except TimeoutError:
            outcome, reason = RenderOutcome.BUDGET, f"not settled within {limits.seconds:g}s: read as it stood"
        except PlaywrightError as exc:
            outcome, reason = RenderOutcome.BUDGET, f"browser: {_first_line(exc)}"
        try:
            async with asyncio.timeout(READ_SECONDS):
                html = (await page.content()).encode("utf-8")
        except (TimeoutError, PlaywrightError) as exc:
            return RenderOutcome.FAILED, f"{reason}; the DOM could not be read: {_first_line(exc)}".strip("; "), None
        return outcome, reason, html

    async def _quiet(self, work: _PageWork) -> None:
        """Wait until no request of the page has been in flight for a moment."""
        while work.in_flight or time.monotonic() - work.last_activity < QUIET_SECONDS:
            await asyncio.sleep(0.05)

    async def _scroll(self, page: Page, work: _PageWork, limits: Limits) -> None:
        """Scroll to the end a few times, for pages that load more as the reader scrolls."""
        height, viewport = await self._settled_height(page, work, 0)
        if height <= viewport:
            return  # nothing below the fold: no scroll can load more
        for _ in range(limits.scroll_steps):
            # The page's scroll handlers run before the next frames, so a request they start is under way
            # (or answered) by the time the quiet wait begins.
            await page.evaluate(f"window.scrollTo(0, document.documentElement.scrollHeight); {NEXT_FRAMES}")
            work.last_activity = time.monotonic()
            await self._quiet(work)
            grown, _viewport = await self._settled_height(page, work, height)
            if grown <= height:
                return
            height = grown

    async def _settled_height(self, page: Page, work: _PageWork, height: int) -> tuple[int, int]:
        """The page's height and the viewport's; asked twice, a quiet moment apart, when it has not
        grown past ``height`` (a busy machine may take longer to write what the last answer brought)."""
        measure = f"{NEXT_FRAMES}.then(() => [document.documentElement.scrollHeight, window.innerHeight])"
        now, viewport = await page.evaluate(measure)
        if now <= max(height, viewport):
            work.last_activity = time.monotonic()
            await self._quiet(work)
            now, viewport = await page.evaluate(measure)
        return now, viewport

    # -- requests ------------------------------------------------------------------------------------

    async def _route(self, route: Route) -> None:
        request = route.request
        try:
            page = request.frame.page
        except Exception:
            page = None
        work = self._work.get(page) if page is not None else None
        if work is None or work.closed:  # a pop-up, or a page whose time is up
            await _abort(route)
            return
        main_frame = request.frame == page.main_frame if page is not None else False
        if request.is_navigation_request() and main_frame and not work.document_served:
            work.document_served = True
            document = work.document
            await _fulfil(route, document.status or 200, document.headers, document.body or b"", document.charset)
            return
        refused = work.allowance.admit(url=request.url, method=request.method, kind=request.resource_type,
                                       navigation=request.is_navigation_request(), main_frame=main_frame)
        if refused is not None:
            work.allowance.record(SubRequest(request.url, request.resource_type, str(refused)))
            await _abort(route)
            return
        task = asyncio.current_task()
        if task is not None:
            work.tasks.add(task)
        work.in_flight += 1
        try:
            await self._answer(route, work)
        finally:
            work.in_flight -= 1
            work.last_activity = time.monotonic()
            if task is not None:
                work.tasks.discard(task)

    async def _answer(self, route: Route, work: _PageWork) -> None:
        request = route.request
        result = await asyncio.get_running_loop().create_task(
            work.fetcher.fetch_async(FetchRequest(request.url, accept=(ContentKind.ANY,))),
            context=work.context.copy())
        body = result.body or b""
        if work.closed:
            await _abort(route)
            return
        if result.outcome is FetchOutcome.FETCHED and not work.allowance.spend(len(body)):
            work.allowance.record(SubRequest(request.url, request.resource_type, str(Refused.BYTES), result.status,
                                             len(body), "the page's byte cap"))
            await _abort(route)
            return
        work.allowance.record(SubRequest(request.url, request.resource_type, str(result.outcome), result.status,
                                         len(body), result.reason))
        if result.status is not None and (result.outcome is FetchOutcome.FETCHED or result.body is None):
            # The site answered (a page's script reads a 404 as a 404); a refusal by policy never got a status.
            await _fulfil(route, result.status, result.headers, body, result.charset)
        else:
            await _abort(route)

    # -- the browser ---------------------------------------------------------------------------------

    async def _browser_started(self) -> Browser:
        if self._started is None:
            self._started = asyncio.get_running_loop().create_future()
            try:
                self._started.set_result(await self._launch())
            except BaseException as exc:
                self._started.set_exception(exc)
                started, self._started = self._started, None
                started.exception()  # retrieved: the next render tries again
                raise
        return await asyncio.shield(self._started)

    async def _launch(self) -> Browser:
        from playwright.async_api import async_playwright

        self._playwright = await async_playwright().start()
        self._browser = await self._playwright.chromium.launch(
            executable_path=self.executable, headless=True, args=[*CONTAINER_ARGS, *NO_NETWORK_ARGS])
        log.info("browser started: %s", self.executable)
        return self._browser

    async def _new_context(self) -> BrowserContext:
        """A site's context: every request routed to the gate and the Fetcher, sockets closed, pop-ups shut."""
        browser = await self._browser_started()
        context = await browser.new_context(service_workers="block", accept_downloads=False, permissions=[],
                                            user_agent=self.user_agent, java_script_enabled=True, bypass_csp=False)
        await context.route("**/*", self._route)
        await context.route_web_socket("**/*", _close_socket)  # a pop-up's sockets (our pages record theirs)
        context.on("page", self._close_if_popup)
        return context

    async def _new_page(self, context: BrowserContext) -> Page:
        page = await context.new_page()

        async def refuse_socket(socket: WebSocketRoute) -> None:
            work = self._work.get(page)
            if work is not None:
                work.allowance.record(SubRequest(socket.url, "websocket", str(Refused.SOCKET)))
            await _close_socket(socket)

        await page.route_web_socket("**/*", refuse_socket)
        return page

    def _close_if_popup(self, popup: Page) -> None:
        async def close() -> None:
            from playwright.async_api import Error as PlaywrightError

            with contextlib.suppress(PlaywrightError):
                if await popup.opener() is not None:  # our own new pages have no opener
                    await popup.close(run_before_unload=False)

        _background.add(task := asyncio.ensure_future(close()))
        task.add_done_callback(_background.discard)

    async def _put_back(self, page: Page, *, healthy: bool) -> Page | None:
        """A page that ended well, blank for its site's next render; None for one that did not (closed: a
        script may still spin)."""
        from playwright.async_api import Error as PlaywrightError

        try:
            if healthy:
                async with asyncio.timeout(READ_SECONDS):
                    await page.goto("about:blank")
                    return page
        except (TimeoutError, PlaywrightError):
            pass
        try:
            async with asyncio.timeout(READ_SECONDS):
                await page.close(run_before_unload=False)
        except (TimeoutError, PlaywrightError) as exc:
            log.warning("a rendered page did not close: %s", _first_line(exc))
        return None

    async def _close(self) -> None:
        await self._sites.close()
        if self._browser is not None:
            await self._browser.close()
        if self._playwright is not None:
            await self._playwright.stop()
        self._started = self._browser = self._playwright = None


async def _fulfil(route: Route, status: int, headers: dict[str, str], body: bytes, charset: str | None) -> None:
    from playwright.async_api import Error as PlaywrightError

    passed = {k: v for k, v in headers.items() if k in PASSED_HEADERS}
    if charset and "content-type" in passed and "charset" not in passed["content-type"].lower():
        passed["content-type"] = f"{passed['content-type']}; charset={charset}"
    with contextlib.suppress(PlaywrightError):  # the page went away meanwhile
        await route.fulfill(status=status, headers=passed, body=body)


async def _abort(route: Route) -> None:
    from playwright.async_api import Error as PlaywrightError

    with contextlib.suppress(PlaywrightError):  # the page went away meanwhile
        await route.abort("blockedbyclient")


async def _close_socket(socket: WebSocketRoute) -> None:
    await socket.close(code=1008, reason="no network")


# Pop-up closings under way (the loop keeps only weak references to tasks).
_background: set[asyncio.Future[None]] = set()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
