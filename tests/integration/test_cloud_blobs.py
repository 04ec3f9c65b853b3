"""One contract for every BlobStore: the local directory and GCS (fake-gcs-server, real client)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from gleaner.errors import BlobConflict, InvalidInput
from gleaner.settings.config import Settings
from gleaner.store.backends.blobs import open_blob_store
from gleaner.store.backends.gcsblobs import GcsBlobStore
from gleaner.store.backends.localblobs import LocalBlobStore

KEY = "domains/example.com/document-snapshots/d1/abc/content.md"


@pytest.fixture(params=["local", "gcs"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "local":
        return LocalBlobStore(tmp_path / "blobs")
    bucket = request.getfixturevalue("gcs_bucket")
    url = request.getfixturevalue("gcs_url")
    settings = Settings(blob_url=f"gs://{bucket}/tenant", storage_emulator_host=url, project="gleaner-test")
    opened = open_blob_store(settings)
    assert isinstance(opened, GcsBlobStore)
    return opened


def test_a_new_key_is_created_and_reads_back(store):
    assert store.put(KEY, b"# hello\n") is True
    assert store.get(KEY) == b"# hello\n"
    assert store.exists(KEY)


def test_writing_the_same_bytes_again_is_a_no_op(store):
    store.put(KEY, b"same")
    assert store.put(KEY, b"same") is False
    assert store.get(KEY) == b"same"


def test_other_bytes_never_overwrite_an_object(store):
    store.put(KEY, b"first")
    with pytest.raises(BlobConflict):
        store.put(KEY, b"second")
    assert store.get(KEY) == b"first"


def test_a_missing_key_reads_as_key_error(store):
    with pytest.raises(KeyError):
        store.get("domains/example.com/runs/r/raw/nope.md")
    assert not store.exists("domains/example.com/runs/r/raw/nope.md")


def test_a_deleted_object_is_gone_and_a_second_delete_says_so(store):
    store.put(KEY, b"erase me")
    assert store.delete(KEY) is True
    assert not store.exists(KEY)
    with pytest.raises(KeyError):
        store.get(KEY)
    assert store.delete(KEY) is False
    assert store.put(KEY, b"new bytes") is True  # a deleted key may be created again


def test_listing_is_sorted_and_limited_to_the_prefix(store):
    for key in ("domains/a.com/runs/r1/raw/2.md", "domains/a.com/runs/r1/raw/1.md", "domains/b.com/x.md"):
        store.put(key, b"x")
    assert store.list("domains/a.com/runs/r1/") == ["domains/a.com/runs/r1/raw/1.md", "domains/a.com/runs/r1/raw/2.md"]


@pytest.mark.parametrize("key", ["", "/abs", "a/../b", "a\\b"])
def test_keys_that_escape_the_layout_are_refused(store, key):
    with pytest.raises(InvalidInput):
        store.put(key, b"x")


def test_racing_writers_of_the_same_bytes_create_the_object_once(store):
    results: list[bool] = []
    barrier = threading.Barrier(6)

    def write() -> None:
        barrier.wait()
        results.append(store.put(KEY, b"body"))

    threads = [threading.Thread(target=write) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 5 + [True]


def test_racing_writers_of_different_bytes_leave_exactly_one_winner(store):
    outcomes: dict[int, str] = {}
    barrier = threading.Barrier(4)

    def write(n: int) -> None:
        barrier.wait()
        try:
            store.put(KEY, f"body {n}".encode())
            outcomes[n] = "created"
        except BlobConflict:
            outcomes[n] = "conflict"

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [n for n, o in outcomes.items() if o == "created"]
    assert len(winners) == 1
    assert store.get(KEY) == f"body {winners[0]}".encode()


def test_gcs_addresses_objects_by_bucket_and_prefix(gcs_bucket, gcs_url):
    store = GcsBlobStore.from_url(f"gs://{gcs_bucket}/tenant",
                                  Settings(storage_emulator_host=gcs_url, project="gleaner-test"))
    assert store.uri(KEY) == f"gs://{gcs_bucket}/tenant/{KEY}"


def test_gcs_stamps_run_artefacts_for_the_lifecycle_rule_and_never_snapshots(gcs_bucket, gcs_url):
    settings = Settings(storage_emulator_host=gcs_url, project="gleaner-test")
    store = GcsBlobStore.from_url(f"gs://{gcs_bucket}", settings)
    run_key = "domains/example.com/runs/r1/raw/abc.md"
    store.put(run_key, b"run")
    store.put(KEY, b"snapshot")
    assert store.bucket.get_blob(run_key).custom_time is not None
    assert store.bucket.get_blob(KEY).custom_time is None


def test_a_copy_is_create_only_like_a_put(store):
    source = "domains/example.com/runs/r1/content/abc.md"
    store.put(source, b"body")
    assert store.copy(source, KEY) is True
    assert store.get(KEY) == b"body"
    assert store.copy(source, KEY) is False  # a redelivered snapshot writes nothing
    other = "domains/example.com/runs/r2/content/abc.md"
    store.put(other, b"other body")
    with pytest.raises(BlobConflict):
        store.copy(other, KEY)
    with pytest.raises(KeyError):
        store.copy("domains/example.com/runs/r9/content/missing.md", KEY + ".x")


def test_gcs_copies_a_run_artefact_into_a_snapshot_without_its_expiry(gcs_bucket, gcs_url):
    store = GcsBlobStore.from_url(f"gs://{gcs_bucket}", Settings(storage_emulator_host=gcs_url, project="gleaner-test"))
    run_key = "domains/example.com/runs/r1/content/abc.md"
    store.put(run_key, b"body")
    store.copy(run_key, KEY)
    assert store.bucket.get_blob(KEY).custom_time is None
