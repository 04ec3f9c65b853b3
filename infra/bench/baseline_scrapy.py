"""The baseline: what a Python engineer would otherwise build. A Scrapy SitemapSpider over the same
robots.txt and sitemaps, the same concurrency, trafilatura markdown in the callback, no storage, one process.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import trafilatura
from ceiling import OPTIONS
from scrapy import signals
from scrapy.crawler import CrawlerProcess
from scrapy.spiders import SitemapSpider

T_PROCESS = time.monotonic()


class BenchSpider(SitemapSpider):
    name = "bench"

    def __init__(self, base: str, **kw):  # type: ignore[no-untyped-def]
        super().__init__(**kw)
        self.sitemap_urls = [base + "/robots.txt"]
        self.pages = 0
        self.chars = 0

    def parse(self, response):  # type: ignore[no-untyped-def]
        text = trafilatura.extract(response.text, url=response.url, **OPTIONS) or ""
        self.pages += 1
        self.chars += len(text)
        return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    times: dict[str, float] = {}
    process = CrawlerProcess(settings={
        "ROBOTSTXT_OBEY": True,
        "CONCURRENT_REQUESTS": args.concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": args.concurrency,
        "DOWNLOAD_DELAY": 0,
        "AUTOTHROTTLE_ENABLED": False,
        "COOKIES_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "USER_AGENT": "bench-baseline (+scrapy)",
    })
    crawler = process.create_crawler(BenchSpider)

    def opened(spider):  # type: ignore[no-untyped-def]
        times.setdefault("open", time.monotonic())

    def closed(spider):  # type: ignore[no-untyped-def]
        times.setdefault("close", time.monotonic())

    # Scrapy holds signal receivers weakly: these names keep them alive until the crawl ends.
    crawler.signals.connect(opened, signal=signals.spider_opened)
    crawler.signals.connect(closed, signal=signals.spider_closed)
    process.crawl(crawler, base=args.base)
    process.start()
    spider = crawler.spider
    seconds = times["close"] - times["open"]
    args.out.write_text(json.dumps({"pages": spider.pages, "seconds": seconds,
                                    "pages_per_second": spider.pages / seconds, "markdown_chars": spider.chars,
                                    "process_seconds": time.monotonic() - T_PROCESS}))


if __name__ == "__main__":
    main()
