"""The storage engines: PostgreSQL (engine construction, migrations, the embedded server and its template,
the pg8000 fast path, the error boundary, per-process caches keyed by the cache generation) and the blob
stores (a local directory or a GCS bucket with the same object layout)."""
