"""The local blob store is create-only: same bytes again is a no-op, other bytes are refused."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from gleaner.errors import BlobConflict, InvalidInput
from gleaner.store.backends import localblobs
from gleaner.store.backends.localblobs import KNOWN_DIRS, LocalBlobStore


def test_a_blob_is_written_once_and_never_overwritten(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    assert store.put("domains/s/a/content.md", b"one") is True
    assert store.put("domains/s/a/content.md", b"one") is False
    with pytest.raises(BlobConflict):
        store.put("domains/s/a/content.md", b"two")
    assert store.get("domains/s/a/content.md") == b"one"
    assert store.list("domains/") == ["domains/s/a/content.md"]  # no temporary file left behind


def test_a_directory_removed_behind_the_stores_back_is_made_again(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    store.put("domains/s/a/one.md", b"1")
    shutil.rmtree(tmp_path / "domains")
    assert store.put("domains/s/a/two.md", b"2") is True
    assert store.get("domains/s/a/two.md") == b"2"


def test_a_store_writing_a_new_directory_per_page_remembers_a_bounded_number_of_them(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    for n in range(KNOWN_DIRS + 200):  # one snapshot directory per page, as a crawl writes them
        store.put(f"domains/s/document-snapshots/{n}/h/content.md", b"x")
    assert len(store._dirs) == KNOWN_DIRS
    shutil.rmtree(tmp_path / "domains/s/document-snapshots/0")  # forgotten, then removed: made again
    store.put("domains/s/document-snapshots/0/h/raw.md", b"y")
    assert store.get("domains/s/document-snapshots/0/h/raw.md") == b"y"


def test_listing_a_prefix_finds_its_keys_only_and_reads_only_its_directory(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    store = LocalBlobStore(tmp_path)
    keys = ["domains/a/runs/r1/bodies/x", "domains/a/runs/r1/bodies/deep/y", "domains/a/runs/r10/bodies/z",
            "domains/a/runs/r2/bodies/w", "domains/b/runs/r1/bodies/v", "top"]
    for key in keys:
        store.put(key, b"1")
    assert store.list("domains/a/runs/r1/bodies/") == ["domains/a/runs/r1/bodies/deep/y", "domains/a/runs/r1/bodies/x"]
    assert store.list("domains/a/runs/r1") == [k for k in sorted(keys) if k.startswith("domains/a/runs/r1")]
    assert store.list("") == sorted(keys)
    assert store.list("domains/c/") == []
    walked: list[str] = []
    real_walk = localblobs.os.walk

    def walk(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
        for folder, dirs, files in real_walk(top):
            walked.append(os.path.relpath(folder, tmp_path))
            yield folder, dirs, files

    monkeypatch.setattr(localblobs.os, "walk", walk)
    assert store.list("domains/a/runs/r2/") == ["domains/a/runs/r2/bodies/w"]
    assert walked == ["domains/a/runs/r2", "domains/a/runs/r2/bodies"]  # not every site's blobs
    with pytest.raises(InvalidInput):
        store.list("domains/../../etc/")
