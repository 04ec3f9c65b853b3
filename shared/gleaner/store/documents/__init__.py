"""Documents, their versions and canonical texts: snapshots, texts, the document lifecycle, routings and
composites, and what provenance keeps or removes (citations, conflicts, erasure and its key, the blocklist,
retention, dropping versions)."""
