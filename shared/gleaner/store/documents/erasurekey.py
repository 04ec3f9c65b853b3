"""The secret behind erased-content digests: from GLEANER_ERASURE_KEY, or generated once locally.

In the cloud the key is a setting (from Secret Manager): every function must
derive the same digests. On one machine (the embedded default) it is generated
on first use and kept beside the data, readable by its owner only, so the same
content is refused across runs.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from gleaner.errors import ConfigError
from gleaner.provenance.digests import KEY_BYTES
from gleaner.settings.config import Settings

KEY_FILE = "erasure.key"


def erasure_secret(settings: Settings) -> bytes:
    if settings.erasure_key:
        return _parse(settings.erasure_key)
    if settings.bus == "gcp":
        raise ConfigError("GLEANER_ERASURE_KEY must be set in the cloud: every function derives the same digests")
    return _local_key(settings.data_dir / KEY_FILE)


def _parse(raw: str) -> bytes:
    try:
        key = bytes.fromhex(raw.strip())
    except ValueError as exc:
        raise ConfigError("GLEANER_ERASURE_KEY must be hex") from exc
    if len(key) != KEY_BYTES:
        raise ConfigError(f"GLEANER_ERASURE_KEY must be {KEY_BYTES} bytes ({2 * KEY_BYTES} hex digits)")
    return key


def _local_key(path: Path) -> bytes:
    try:
        return _parse(path.read_text())
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _temp(path)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(KEY_BYTES))
        with contextlib.suppress(FileExistsError):  # create-only: a racing process's key wins, both use it
            os.link(tmp, path)
    finally:
        os.unlink(tmp)
    return _parse(path.read_text())


def _temp(path: Path) -> tuple[int, str]:
    import tempfile

    return tempfile.mkstemp(dir=path.parent, prefix=".tmp-key-")
