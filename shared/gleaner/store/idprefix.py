"""Which ids of a kind lie between two bounds: what :mod:`gleaner.display.idprefix` expands a typed prefix with.

A bounded range on the primary key (``id BETWEEN low AND high``) uses its index; a text ``LIKE`` on the
id would read every row. Removed subscriptions are left out, as everywhere else they are invisible.
"""

from __future__ import annotations

from collections.abc import Sequence

from gleaner.store.backends.sqlstore import SqlStore

# kind -> (table, extra condition); every table's key is a uuid column ``id``.
_TABLES: dict[str, tuple[str, str]] = {
    "run": ("knowledge.crawl_runs", ""),
    "subscription": ("knowledge.notify_subscriptions", " AND removed_at IS NULL"),
    "delivery": ("knowledge.notify_deliveries", ""),
    "document": ("knowledge.documents", ""),
    "composite": ("knowledge.composite_documents", ""),
    "token": ("knowledge.caller_tokens", ""),
    "conflict": ("knowledge.document_conflicts", ""),
    "citation": ("knowledge.citations", ""),
    "reference": ("knowledge.reference_items", ""),
    "rule": ("knowledge.site_rules", ""),
}


class IdPrefixStore(SqlStore):
    def ids_between(self, kind: str, low: str, high: str, limit: int) -> Sequence[str]:
        table, extra = _TABLES[kind]
        rows = self._all(f"SELECT CAST(id AS text) FROM {table} WHERE id BETWEEN CAST(:lo AS uuid)"
                         f" AND CAST(:hi AS uuid){extra} ORDER BY id LIMIT :n",
                         {"lo": low, "hi": high, "n": limit})
        return [r[0] for r in rows]
