"""Fetch once per run, in the ledger: answers kept for scrape, and the links a page's body held.

What map's walk or sample's sample got for a page goes on the run's ledger row with the
row's insert (store/ledger/discovery.py) or its decision (store/ledger/decisions.py); the first answer
stands (a redelivery finds it set). Scrape reads it back through ``RunPage.prefetched``.

``page_links`` holds the links and feeds of each walked page's body with the
validators that body came with. A recrawl's walk asks every page it read before
conditionally with those validators, so a 304 vouches for the stored links. The
304 also settles the page as unchanged for scrape only when those validators are
the document's own (the ones its current snapshot was fetched with): a page with
no snapshot (one the decider excluded, a hub page) is still asked conditionally,
and its 304 serves the walk and the sample's verdict, never scrape. A page whose
body did not change writes nothing here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from gleaner.store.backends.sqlstore import SqlStore, json_rows


@dataclass(frozen=True, slots=True)
class KnownLinks:
    """A page's links as last read, and the validators to ask whether they still hold."""

    etag: str | None
    last_modified: str | None
    links: tuple[str, ...]
    feeds: tuple[str, ...]
    chain: tuple[str, ...] = ()  # rel next / prev links (discover/links.py)


class PrefetchStore(SqlStore):
    def known_links(self, site: str, urls: Sequence[str]) -> dict[str, KnownLinks]:
        """Canonical URL -> its stored links, for pages the rules skip that have no current snapshot and for
        pages whose current snapshot came with the same validators (only those a 304 settles for scrape).

        A page with a snapshot fetched with other validators (the walk read a body scrape has not stored) is
        left out: a 304 to the walk's validators would tell scrape the snapshot is current when it is not.
        So is a page scrape is to store but has no snapshot of (its last scrape failed): a 304 would leave
        scrape nothing to store, and it would ask the site a second time.
        """
        if not urls:
            return {}
        rows = self._all(
            "SELECT d.canonical_url, l.etag, l.last_modified, l.links, l.feeds, l.chain"
            " FROM json_array_elements_text(CAST(:urls AS json)) AS t(cu)"
            " JOIN knowledge.documents d ON d.site_domain = :s AND d.canonical_url = t.cu"
            " JOIN knowledge.page_links l ON l.document_id = d.id"
            " WHERE (l.etag IS NOT NULL OR l.last_modified IS NOT NULL)"
            "   AND ((d.current_snapshot_id IS NULL AND d.scrape_policy = 'skip')"
            "   OR (l.etag IS NOT DISTINCT FROM d.http_etag"
            "       AND l.last_modified IS NOT DISTINCT FROM d.http_last_modified))",
            {"s": site, "urls": json.dumps(list(urls))},
        )
        return {str(r[0]): KnownLinks(r[1], r[2], tuple(r[3]), tuple(r[4] or ()), tuple(r[5] or ())) for r in rows}

    def save_links(self, site: str, run_id: str,
                   rows: Sequence[tuple[str, str | None, str | None, Sequence[str], Sequence[str], Sequence[str]]]
                   ) -> None:
        """rows: (canonical url, etag, last_modified, links, feeds, chain) of pages the walk read this run."""
        if not rows:
            return
        self._run(
            "INSERT INTO knowledge.page_links (document_id, site_domain, etag, last_modified, links, feeds, chain,"
            " run_id)"
            " SELECT d.id, :s, t.et, t.lm, t.ln, t.fd, COALESCE(t.ch, '[]'::jsonb), CAST(:r AS uuid)"
            " FROM json_to_recordset(CAST(:rows AS json))"
            "   AS t(cu text, et text, lm text, ln jsonb, fd jsonb, ch jsonb)"
            " JOIN knowledge.documents d ON d.site_domain = :s AND d.canonical_url = t.cu"
            " ON CONFLICT (document_id) DO UPDATE SET etag = EXCLUDED.etag,"
            " last_modified = EXCLUDED.last_modified, links = EXCLUDED.links, feeds = EXCLUDED.feeds,"
            " chain = EXCLUDED.chain, run_id = EXCLUDED.run_id, updated_at = now()"
            " WHERE (knowledge.page_links.etag, knowledge.page_links.last_modified, knowledge.page_links.links,"
            "   knowledge.page_links.feeds, knowledge.page_links.chain) IS DISTINCT FROM"
            "   (EXCLUDED.etag, EXCLUDED.last_modified, EXCLUDED.links, EXCLUDED.feeds, EXCLUDED.chain)",
            {"s": site, "r": run_id, "rows": json_rows([{"cu": u, "et": et, "lm": lm, "ln": list(ln), "fd": list(fd),
                                                         "ch": list(ch)} for u, et, lm, ln, fd, ch in rows])},
        )
