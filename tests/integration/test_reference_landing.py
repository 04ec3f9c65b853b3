"""The landing stage with an injected resolver: an address refused only at fetch time is still an SSRF finding."""

from __future__ import annotations

from datetime import UTC, datetime

from gleaner.app import Deps
from gleaner.bus.local import LocalBus
from gleaner.fetch.fetcher import Fetcher
from gleaner.messages import ArticlesAccepted
from gleaner.stages import dispatch
from gleaner.store.feeds.references import ArticleRow
from tests.conftest import test_settings


def test_a_name_that_rebinds_to_a_private_address_at_fetch_time_is_recorded_as_ssrf(tmp_path, database_url):
    # The landing's pre-check cannot resolve "rebind.test" (not a refusal: DNS may be down); the fetcher's
    # resolver then answers a private address, and the fetcher refuses to connect.
    def rebinding(host: str, port: int) -> list[str]:
        return ["10.0.0.7"]

    deps = Deps(test_settings(tmp_path, database_url), bus_override=LocalBus(),
                fetcher_factory=lambda settings: Fetcher(settings, resolver=rebinding, respect_robots=False))
    try:
        (row_id,) = deps.references.record_articles([ArticleRow(
            workspace_id="w", external_url="http://rebind.test/a", normalised_url="http://rebind.test/a",
            title="Rebinding", summary=None, published_at=datetime(2026, 6, 1, tzinfo=UTC), feed_source=None)])
        report = dispatch(ArticlesAccepted(article_ids=(row_id,)), deps)
        assert report.ssrf_rejected == ["http://rebind.test/a"]
        (finding,) = deps.references.quality_log("http://rebind.test/a")
        assert finding["flag_type"] == "ssrf_rejected"
        assert "10.0.0.7" in finding["reason"]
        assert finding["feed_article_ids"] == [row_id]
        assert deps.references.counts()["reference_items"] == 0
    finally:
        deps.close()
