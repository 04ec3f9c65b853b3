"""The local blob store is create-only: same bytes again is a no-op, other bytes are refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gleaner.errors import BlobConflict
from gleaner.store.localblobs import LocalBlobStore


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
