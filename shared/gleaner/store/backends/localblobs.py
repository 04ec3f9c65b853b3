"""A local directory with the bucket's exact object layout: the embedded default."""

from __future__ import annotations

import itertools
import os
import threading
from collections import OrderedDict
from pathlib import Path

from gleaner.errors import BlobConflict, InvalidInput, RetryableError

# Directories remembered as made: a run writes into a few directories again and again (its artefacts)
# and into one new directory per snapshot, which it never writes into again. The least recently used
# are forgotten, so a long-lived process does not hold one entry per page it ever stored.
KNOWN_DIRS = 1024


class LocalBlobStore:
    """Paths on the write and read paths are strings: a pathlib object per key cost more than the copy."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._root = str(self.root)
        # Directories this store made or found: a crawl writes thousands of blobs into few directories,
        # and a mkdir per blob was most of a write's cost. A directory removed behind its back is made again.
        self._dirs: OrderedDict[str, None] = OrderedDict()
        self._tmp_names = itertools.count()
        self._lock = threading.Lock()

    def _parent(self, path: str) -> str:
        parent = path.rpartition("/")[0]
        with self._lock:
            known = parent in self._dirs
            if known:
                self._dirs.move_to_end(parent)
        if not known:
            os.makedirs(parent, exist_ok=True)
            self._remember(parent)
        return parent

    def _remember(self, directory: str) -> None:
        with self._lock:
            self._dirs[directory] = None
            self._dirs.move_to_end(directory)
            while len(self._dirs) > KNOWN_DIRS:
                self._dirs.popitem(last=False)

    def _forget(self, directory: str) -> None:
        with self._lock:
            self._dirs.pop(directory, None)

    def _tmp(self, parent: str) -> tuple[int, str]:
        """A new temporary file beside the key, named by process, store and a counter (mkstemp's random
        names cost more than the write); a name left by a crashed process is skipped, a directory removed
        behind the store's back made again."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        for _ in range(100):
            with self._lock:
                n = next(self._tmp_names)
            tmp = f"{parent}/.tmp-{os.getpid()}-{id(self):x}-{n}"
            try:
                return os.open(tmp, flags, 0o600), tmp
            except FileExistsError:
                continue
            except FileNotFoundError:
                self._forget(parent)
                os.makedirs(parent, exist_ok=True)
                self._remember(parent)
        raise FileExistsError(f"no free temporary name in {parent}")

    def _path(self, key: str) -> Path:
        return Path(self._file(key))

    def _file(self, key: str) -> str:
        """The key's file under the root, as a string (a key that could leave the root is refused)."""
        if not key or key.startswith("/") or ".." in key.split("/") or "\\" in key or "\x00" in key:
            raise InvalidInput(f"invalid blob key {key!r}")
        return f"{self._root}/{key}"

    def put(self, key: str, data: bytes, content_type: str = "text/markdown; charset=utf-8") -> bool:
        path = self._file(key)
        try:
            parent = self._parent(path)
            # Write to a temporary file, then link it into place: link fails if the key exists or appeared
            # meanwhile, so two racing writers cannot both "create" and no reader sees half a file.
            fd, tmp = self._tmp(parent)
            try:
                try:
                    _write_all(fd, data)
                finally:
                    os.close(fd)
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    return self._same(path, key, data)
            finally:
                os.unlink(tmp)
        except OSError as exc:
            raise RetryableError(f"cannot write blob {key}: {exc}") from exc
        return True

    def copy(self, source: str, target: str) -> bool:
        """A hard link: no bytes are read or written, and the target stays create-only."""
        src, dst = self._file(source), self._file(target)
        try:
            self._parent(dst)
            try:
                os.link(src, dst)
            except FileExistsError:
                return self._same(dst, target, _read(src))
            except FileNotFoundError:
                if not os.path.exists(src):
                    raise KeyError(source) from None
                # The target's directory went away after this store made it: make it again, once.
                self._forget(dst.rpartition("/")[0])
                self._parent(dst)
                os.link(src, dst)
        except OSError as exc:
            raise RetryableError(f"cannot copy blob {source} to {target}: {exc}") from exc
        return True

    @staticmethod
    def _same(path: str, key: str, data: bytes) -> bool:
        if _read(path) != data:
            raise BlobConflict(f"blob {key} exists with different bytes; blobs are never overwritten")
        return False

    def get(self, key: str) -> bytes:
        path = self._file(key)
        try:
            return _read(path)
        except FileNotFoundError:
            raise KeyError(key) from None
        except OSError as exc:
            raise RetryableError(f"cannot read blob {key}: {exc}") from exc

    def delete(self, key: str) -> bool:
        path = self._file(key)
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise RetryableError(f"cannot delete blob {key}: {exc}") from exc
        return True

    def exists(self, key: str) -> bool:
        return os.path.isfile(self._file(key))

    def list(self, prefix: str) -> list[str]:
        """Keys under ``prefix``, sorted. Only the prefix's own directory is walked (a run's few files, not
        every blob of every site: settling each run of a multi-site tick walked the whole store)."""
        directory = prefix.rpartition("/")[0]
        if directory.startswith("/") or ".." in directory.split("/") or "\x00" in directory:
            raise InvalidInput(f"invalid blob prefix {prefix!r}")
        start = os.path.join(self._root, directory) if directory else self._root
        if not os.path.isdir(start):
            return []
        keys = []
        for folder, _dirs, files in os.walk(start):
            relative = os.path.relpath(folder, self._root).replace(os.sep, "/")
            for name in files:
                if name.startswith(".tmp-"):
                    continue
                key = name if relative == "." else f"{relative}/{name}"
                if key.startswith(prefix):
                    keys.append(key)
        return sorted(keys)

    def uri(self, key: str) -> str:
        return f"file://{self._path(key)}"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()
