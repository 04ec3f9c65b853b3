"""Identity of the reference layer: ids minted from the normalised URL, and the pseudo-tenant.

Seed 000 mints ``uuid5(NS, "sd:" + url)`` for the source document and
``uuid5(NS, "ri:" + url)`` for the reference item, and never ``"ci:"`` from a URL
(client knowledge is reached only by adoption). Gleaner's namespace is
``REFERENCES_NS = uuid5(GLEANER_NS, "references")``, written out below so that it
can never drift: changing it would re-mint every reference id.

Reference documents live under their own site domain, ``_references``: a
leading underscore is not valid in a host name, so it can never collide with a
tenant's site, and a tenant crawl of the same URL keeps its own document.
"""

from __future__ import annotations

import uuid

REFERENCES_NS = uuid.UUID("f1f5348c-3a1e-514f-8ffe-4e7debc90413")
REFERENCES_SITE = "_references"


def reference_item_id(normalised_url: str) -> str:
    return str(uuid.uuid5(REFERENCES_NS, "ri:" + normalised_url))


def source_document_id(normalised_url: str) -> str:
    return str(uuid.uuid5(REFERENCES_NS, "sd:" + normalised_url))
