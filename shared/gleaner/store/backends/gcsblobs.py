"""Blobs in a GCS bucket, with the same create-only contract as the local directory.

``put`` uploads with ``if_generation_match=0``: GCS creates the object only if
no live generation exists (and the client retries such an upload safely, since
the precondition makes it idempotent — FACTS.md). A 412 means the key exists:
the same bytes make the write a no-op (a redelivery), other bytes raise
BlobConflict. ``STORAGE_EMULATOR_HOST`` (from the settings) points the client at
an emulator with anonymous credentials.

Errors are translated at this boundary::

    NotFound on get              -> KeyError (the port's "absent")
    NotFound on delete           -> False (already gone: erasure and retention re-run safely)
    400 Bad Request              -> InvalidInput
    412 with other bytes         -> BlobConflict
    anything else from the API,
    connection errors, timeouts  -> RetryableError (redeliver; a 403 fixed by IAM then succeeds)
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gleaner.errors import BlobConflict, ConfigError, InvalidInput, RetryableError
from gleaner.settings.config import Settings
from gleaner.store.backends.blobs import is_run_artefact


def _transient() -> tuple[type[BaseException], ...]:
    """What a call to GCS may raise that another attempt could cure (API errors, transport failures)."""
    import requests
    from google.api_core import exceptions as gexc

    return (gexc.GoogleAPIError, requests.RequestException, ConnectionError, TimeoutError, OSError)


class GcsBlobStore:
    def __init__(self, client: Any, bucket: str, prefix: str = "") -> None:
        self.client = client
        self.bucket_name = bucket
        self.bucket = client.bucket(bucket)
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> GcsBlobStore:
        """gs://bucket[/prefix]; the client is built here, once per Deps."""
        rest = url[len("gs://"):]
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise ConfigError(f"GLEANER_BLOB_URL {url!r} names no bucket")
        return cls(new_client(settings), bucket, prefix)

    def _name(self, key: str) -> str:
        if not key or key.startswith("/") or ".." in key.split("/") or "\\" in key or "\x00" in key:
            raise InvalidInput(f"invalid blob key {key!r}")
        return self.prefix + key

    def put(self, key: str, data: bytes, content_type: str = "text/markdown; charset=utf-8") -> bool:
        from google.api_core import exceptions as gexc

        blob = self.bucket.blob(self._name(key))
        if is_run_artefact(key):
            # The bucket's lifecycle rule deletes by Custom-Time: a literal matches_prefix cannot say
            # domains/*/runs/, so run artefacts are stamped and snapshots are not (terraform/storage.tf).
            blob.custom_time = datetime.now(UTC)
        try:
            blob.upload_from_string(data, content_type=content_type, if_generation_match=0)
        except gexc.PreconditionFailed:
            if self.get(key) != data:
                raise BlobConflict(f"blob {key} exists with different bytes; blobs are never overwritten") from None
            return False
        except gexc.BadRequest as exc:
            raise InvalidInput(f"GCS refused blob {key}: {exc}") from exc
        except _transient() as exc:
            raise RetryableError(f"cannot write blob {key}: {exc}") from exc
        return True

    def copy(self, source: str, target: str) -> bool:
        # Not a server-side copy: that would carry a run artefact's Custom-Time over to the target,
        # and the lifecycle rule would then delete a snapshot body. Through put, target is unstamped.
        return self.put(target, self.get(source))

    def get(self, key: str) -> bytes:
        from google.api_core import exceptions as gexc

        try:
            data: bytes = self.bucket.blob(self._name(key)).download_as_bytes()
        except gexc.NotFound:
            raise KeyError(key) from None
        except _transient() as exc:
            raise RetryableError(f"cannot read blob {key}: {exc}") from exc
        return data

    def delete(self, key: str) -> bool:
        from google.api_core import exceptions as gexc

        try:
            self.bucket.blob(self._name(key)).delete()
        except gexc.NotFound:
            return False
        except _transient() as exc:
            raise RetryableError(f"cannot delete blob {key}: {exc}") from exc
        return True

    def exists(self, key: str) -> bool:

        try:
            return bool(self.bucket.blob(self._name(key)).exists())
        except _transient() as exc:
            raise RetryableError(f"cannot stat blob {key}: {exc}") from exc

    def list(self, prefix: str) -> list[str]:

        try:
            names = [b.name for b in self.client.list_blobs(self.bucket_name, prefix=self.prefix + prefix)]
        except _transient() as exc:
            raise RetryableError(f"cannot list blobs under {prefix}: {exc}") from exc
        return sorted(n[len(self.prefix):] for n in names)

    def uri(self, key: str) -> str:
        return f"gs://{self.bucket_name}/{self._name(key)}"


def new_client(settings: Settings) -> Any:
    import google.cloud.storage as storage

    host = settings.storage_emulator_host
    if host:
        from google.auth.credentials import AnonymousCredentials

        endpoint = host if host.startswith(("http://", "https://")) else f"http://{host}"
        return storage.Client(project=settings.project or "gleaner-local", credentials=AnonymousCredentials(),
                              client_options={"api_endpoint": endpoint})
    return storage.Client(project=settings.project)
