import threading

import pytest

from gleaner.bus.local import LocalBus
from gleaner.errors import BlobConflict, InvalidInput, RetryableError
from gleaner.messages import CrawlMapped, ScrapeBatch
from gleaner.store.backends.localblobs import LocalBlobStore


def test_blob_writes_are_create_only(tmp_path):
    store = LocalBlobStore(tmp_path)
    assert store.put("domains/a/x.md", b"one") is True
    assert store.put("domains/a/x.md", b"one") is False  # a redelivery writes nothing
    with pytest.raises(BlobConflict):
        store.put("domains/a/x.md", b"two")
    assert store.get("domains/a/x.md") == b"one"
    assert store.list("domains/") == ["domains/a/x.md"]
    with pytest.raises(KeyError):
        store.get("domains/a/missing.md")


@pytest.mark.parametrize("key", ["../etc/passwd", "/abs", "a/../../b", "a\\b", ""])
def test_blob_keys_cannot_escape_the_root(tmp_path, key):
    with pytest.raises(InvalidInput):
        LocalBlobStore(tmp_path).put(key, b"x")


def test_racing_writers_of_one_key_leave_one_object(tmp_path):
    store = LocalBlobStore(tmp_path)
    results = []

    def write():
        results.append(store.put("k/race.md", b"same bytes"))

    threads = [threading.Thread(target=write) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1 and store.get("k/race.md") == b"same bytes"
    assert [p.name for p in (tmp_path / "k").iterdir()] == ["race.md"]


def test_the_local_bus_delivers_retries_and_dead_letters():
    bus = LocalBus(backoff_seconds=0, max_attempts=3)
    seen = []
    failures = {"n": 0}

    def flaky(message):
        if failures["n"] < 2:
            failures["n"] += 1
            raise RetryableError("transient")
        seen.append(message)

    def poison(message):
        raise RetryableError("always")

    bus.subscribe("crawl-mapped", flaky)
    bus.subscribe("scrape", poison)
    bus.publish(CrawlMapped(run_id="r", site_domain="s"))
    assert bus.enqueue(ScrapeBatch(run_id="r", site_domain="s", batch_no=0)) is True
    assert bus.enqueue(ScrapeBatch(run_id="r", site_domain="s", batch_no=0)) is False  # same task name
    bus.drain()
    assert seen == [CrawlMapped(run_id="r", site_domain="s")]
    assert len(bus.dead_letters) == 1 and bus.dead_letters[0].attempts == 3


def test_permanent_errors_are_acked_not_retried():
    bus = LocalBus(backoff_seconds=0)
    calls = []

    def bad(message):
        calls.append(1)
        raise InvalidInput("bad")

    bus.subscribe("crawl-mapped", bad)
    bus.publish(CrawlMapped(run_id="r", site_domain="s"))
    bus.drain()
    assert calls == [1] and bus.dead_letters == []
