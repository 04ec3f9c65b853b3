"""The multi-site baseline: one Scrapy process over N hosts, one download slot per host at the same delay
(DOWNLOAD_DELAY, not randomised, one request at a time per host), robots.txt obeyed, each host's
sitemap from its robots.txt, trafilatura markdown in ``parse()``, nothing stored."""

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


class MultiSiteSpider(SitemapSpider):
    name = "multisite"

    def __init__(self, bases: str, **kw):  # type: ignore[no-untyped-def]
        super().__init__(**kw)
        self.sitemap_urls = [base + "/robots.txt" for base in bases.split(",")]
        self.pages = 0

    def parse(self, response):  # type: ignore[no-untyped-def]
        trafilatura.extract(response.text, url=response.url, **OPTIONS)
        self.pages += 1
        return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bases", help="comma-separated base URLs")
    parser.add_argument("--delay", type=float, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    times: dict[str, float] = {}
    process = CrawlerProcess(settings={
        "ROBOTSTXT_OBEY": True,
        "CONCURRENT_REQUESTS": 16,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOWNLOAD_DELAY": args.delay,
        "RANDOMIZE_DOWNLOAD_DELAY": False,
        "AUTOTHROTTLE_ENABLED": False,
        "COOKIES_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "USER_AGENT": "bench-baseline (+scrapy)",
    })
    crawler = process.create_crawler(MultiSiteSpider)

    def opened(spider):  # type: ignore[no-untyped-def]
        times.setdefault("open", time.monotonic())

    def closed(spider):  # type: ignore[no-untyped-def]
        times.setdefault("close", time.monotonic())

    crawler.signals.connect(opened, signal=signals.spider_opened)
    crawler.signals.connect(closed, signal=signals.spider_closed)
    process.crawl(crawler, bases=args.bases)
    process.start()
    args.out.write_text(json.dumps({"pages": crawler.spider.pages, "seconds": times["close"] - times["open"],
                                    "process_seconds": time.monotonic() - T_PROCESS}))


if __name__ == "__main__":
    main()
