"""Rendering pages with JavaScript, behind the same gate as every plain fetch.

::

    modes.py     when to render: never | auto | always, and which of two extractions is better (pure)
    gate.py      what one rendered page may ask for: per-page caps, refused methods and kinds (pure)
    browser.py   one warm headless Chromium per process; every request it makes answered by the Fetcher
    contexts.py  a browser context per site (tenant and origin): no page sees another site's storage
    rendering.py what a rendering is, and the one thing it needs of the Fetcher
    remote.py    the render service's client: the same rendering, read by the cloud's render service
    kept.py      a rendering made once a run, kept for the stages after it
    discovery.py map's walk: links only a rendered DOM holds
    sampling.py  the sampler's question: is this section better read rendered (auto)?
    reader.py    scrape's pages as read: which the browser reads (decided here), each with its facts

The browser has no network of its own: every request a page makes is intercepted and answered by
Gleaner's :class:`~gleaner.fetch.fetcher.Fetcher` (address policy, robots.txt, politeness, caps), and
Chromium is started with its resolver mapped to nowhere and a proxy that does not exist, so a request
that slipped past the interception fails instead of reaching the network.
"""
