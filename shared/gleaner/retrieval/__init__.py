"""Retrieval over the kept copy: citable chunks, local embeddings, hybrid search (docs/retrieval.md).

``search(deps, query, site_domain=None, limit=10)`` is the public entry point the CLI, ``/v1/search``
and the agent interface share; it answers in the caller's tenant scope.
"""

from gleaner.retrieval.ranking import search

__all__ = ["search"]
