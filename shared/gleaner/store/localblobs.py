"""A local directory with the bucket's exact object layout: the embedded default."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from gleaner.errors import BlobConflict, InvalidInput, RetryableError


class LocalBlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def _path(self, key: str) -> Path:
        if not key or key.startswith("/") or ".." in key.split("/") or "\\" in key or "\x00" in key:
            raise InvalidInput(f"invalid blob key {key!r}")
        return self.root / key

    def put(self, key: str, data: bytes, content_type: str = "text/markdown; charset=utf-8") -> bool:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists():
                return self._same(path, key, data)
            # Write to a temporary file, then link it into place: link fails if the key appeared
            # meanwhile, so two racing writers cannot both "create" and no reader sees half a file.
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
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
        src, dst = self._path(source), self._path(target)
        try:
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dst)
            except FileExistsError:
                return self._same(dst, target, src.read_bytes())
            except FileNotFoundError:
                raise KeyError(source) from None
        except OSError as exc:
            raise RetryableError(f"cannot copy blob {source} to {target}: {exc}") from exc
        return True

    @staticmethod
    def _same(path: Path, key: str, data: bytes) -> bool:
        if path.read_bytes() != data:
            raise BlobConflict(f"blob {key} exists with different bytes; blobs are never overwritten")
        return False

    def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise KeyError(key) from None
        except OSError as exc:
            raise RetryableError(f"cannot read blob {key}: {exc}") from exc

    def delete(self, key: str) -> bool:
        path = self._path(key)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise RetryableError(f"cannot delete blob {key}: {exc}") from exc
        return True

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list(self, prefix: str) -> list[str]:
        base = self.root
        if not base.exists():
            return []
        keys = []
        for path in base.rglob("*"):
            if path.is_file() and not path.name.startswith(".tmp-"):
                key = path.relative_to(base).as_posix()
                if key.startswith(prefix):
                    keys.append(key)
        return sorted(keys)

    def uri(self, key: str) -> str:
        return f"file://{self._path(key)}"
