"""PostgreSQL and the blob store: every SQL statement and every object Gleaner keeps, grouped by aggregate.

Each sub-package owns one aggregate's tables; the modules left here compose them into the repositories
the stages are given (``metadata.MetadataStore``, ``provenance.ProvenanceStore``) and the reads across
aggregates (``reads``, ``browse``).
"""
