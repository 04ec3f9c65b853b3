"""Gleaner's error tree. Library exceptions are translated into it at adapter boundaries.

::

    GleanerError
    ├── PermanentError        bad input or refused by policy: record the status, ack, never retry
    │   ├── InvalidInput      malformed message, URL, glob, webhook body, ...
    │   ├── ConfigError       a setting that cannot work
    │   ├── PolicyRefused     the fetcher or a gate said no (robots, address policy, size)
    │   └── BlobConflict      a create-only object exists with other bytes
    └── RetryableError        transient I/O (database, blob store, bus, network): redeliver with backoff

Entry points map PermanentError to "ack" (Pub/Sub: return; HTTP: 4xx) and
RetryableError to "redeliver" (Pub/Sub: raise; HTTP: 5xx), so no handler has
to know which trigger called it.
"""

from __future__ import annotations


class GleanerError(Exception):
    """Base of every error Gleaner raises on purpose."""


class PermanentError(GleanerError):
    """Retrying cannot help: record the failure and acknowledge."""


class InvalidInput(PermanentError):
    """Input from outside (a message, URL, glob, body) is malformed."""


class ConfigError(PermanentError):
    """A setting is missing or cannot work."""


class PolicyRefused(PermanentError):
    """A safety or politeness rule refused the action."""


class BlobConflict(PermanentError):
    """A create-only blob already exists with different bytes."""


class RetryableError(GleanerError):
    """Transient I/O failure: the trigger should redeliver with backoff."""
