"""Review in PostgreSQL: the pages waiting for the operator, and recording the operator's decision.

What a decision means (it outranks rules and the decider, in every later run) is
:mod:`gleaner.operator.review`; this module finds the document, records the decision, settles the latest
run's ledger row and re-materialises the site's rules, in one transaction.
"""

from __future__ import annotations

import sqlalchemy as sa

from gleaner.errors import InvalidInput
from gleaner.operator.review import Decided, ReviewDecision, ReviewItem
from gleaner.store.backends.sqlstore import SqlStore
from gleaner.store.registry.rules import apply_rules, lock_site_rules


class ReviewStore(SqlStore):
    def review_items(self, site: str) -> list[ReviewItem]:
        """Pages of the site's latest sampled run that need review or were excluded, with no operator decision
        yet: those needing review first, then the excluded ones, each by path."""
        rows = self._all(
            "WITH latest AS (SELECT id FROM knowledge.crawl_runs WHERE site_domain = :s"
            "   AND status IN ('scraping', 'finished', 'partial') ORDER BY created_at DESC LIMIT 1)"
            " SELECT d.id, d.canonical_url, d.path, c.run_id, c.decision_reason, c.decision_confidence,"
            " c.decision::text FROM latest JOIN knowledge.crawl_page_decisions c ON c.run_id = latest.id"
            " JOIN knowledge.documents d ON d.id = c.document_id"
            " WHERE c.decision IN ('needs_review', 'exclude') AND d.operator_decision IS NULL AND NOT d.is_deleted"
            " ORDER BY c.decision = 'exclude', d.path",
            {"s": site},
        )
        return [ReviewItem(str(r[0]), r[1], r[2], str(r[3]), r[4], r[5], r[6]) for r in rows]

    def record_review(self, canonical: str, site: str | None, decision: ReviewDecision, reason: str | None,
                      why: str) -> Decided:
        """The decision onto the document at ``canonical`` (in ``site``, if given) and the latest run's ledger."""
        with self._tx() as conn:
            found = conn.execute(
                sa.text("SELECT id, site_domain FROM knowledge.documents WHERE canonical_url = :u"
                        " AND (CAST(:s AS text) IS NULL OR site_domain = :s) ORDER BY site_domain"),
                {"u": canonical, "s": site},
            ).all()
            if not found:
                raise InvalidInput(f"no document for {canonical}" + (f" in site {site}" if site else ""))
            if len(found) > 1:
                raise InvalidInput(f"{canonical} is known under several sites ({', '.join(r[1] for r in found)}):"
                                   " name one with --site-domain")
            doc_id, doc_site = str(found[0][0]), found[0][1]
            lock_site_rules(conn, doc_site)  # before any row lock: the order every rule writer takes
            exclude = decision is ReviewDecision.EXCLUDE
            conn.execute(
                sa.text(
                    "UPDATE knowledge.documents SET operator_decision = CAST(:dec AS knowledge.page_decision),"
                    " operator_reason = :why, operator_decided_at = now(),"
                    " scrape_policy = CAST(:pol AS knowledge.scrape_policy), skip_reason = :skr,"
                    " skip_by_decider = false, skip_rule_id = NULL, updated_at = now() WHERE id = :d"
                ),
                {"dec": str(decision), "why": reason, "pol": "skip" if exclude else "scrape",
                 "skr": why if exclude else None, "d": doc_id},
            )
            conn.execute(
                sa.text(
                    "UPDATE knowledge.crawl_page_decisions SET decision = CAST(:dec AS knowledge.page_decision),"
                    " decision_source = 'operator', decision_reason = :why, decision_confidence = 1.0"
                    " WHERE document_id = :d AND decision = 'needs_review'"
                    " AND run_id = (SELECT id FROM knowledge.crawl_runs WHERE site_domain = :s"
                    "   ORDER BY created_at DESC LIMIT 1)"
                ),
                {"dec": str(decision), "why": why, "d": doc_id, "s": doc_site},
            )
            apply_rules(conn, doc_site)
        return Decided(doc_id, doc_site, canonical, decision, reason)
