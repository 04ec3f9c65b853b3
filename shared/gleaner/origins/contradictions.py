"""The contradiction detector: each new or changed text against the tenant's other chunks.

For every snapshot ingest just indexed, each chunk of its text is a query. An upload's or a feedback's
is compared with every other document of its site; a crawled page's only with the site's uploads and
feedback (their chunks scanned exactly: they are few), and not at all on a site that has none, so a
crawl never waits for its pages to be compared with each other. The nearest chunks by embedding
(``knowledge.chunk_vector_candidates``, the
HNSW index's top ``CANDIDATES`` and the fresh vectors' nearest: once they are many, only the
``PICKED`` the sign-bit scan chose are compared, as search does (gleaner.retrieval.fresh_scan), so
the cost of a page does not grow with the tenant's size, nor with a first crawl's) are kept when
they belong to another current, active document of the same tenant (row-level security and an
explicit ``site_domain`` test: never another tenant's) and are at least ``MIN_SIMILARITY`` alike.
Without pgvector, the chunk's words find the candidates (``knowledge.chunk_word_candidates``). Each
pair goes to the judge (gleaner.origins.judge): the configured language model's
(gleaner.origins.modeljudge: ``detected_by = llm_judge``, the rules standing in for a pair it fails
on), else the rules judge (``detected_by = rules``). A contradiction is recorded once per pair of
passages and detector version (the table's key, migration 0047: the two documents and the two quoted
passages, so the same pair found again by a re-ingest adds nothing) with both byte ranges in
canonical text, and opens one ``conflict.opened`` change event.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from gleaner.app import Deps
from gleaner.changes.events import Change, EventType
from gleaner.origins.judge import Judgement, PairJudge, Relation, RulesJudge
from gleaner.origins.modeljudge import ModelJudge
from gleaner.provenance.conflicts import ConflictType
from gleaner.retrieval.fresh_scan import FreshSigns
from gleaner.store.backends.sqlstore import json_rows, json_value
from gleaner.store.notifications.events import record_changes

log = logging.getLogger(__name__)

CANDIDATES = 8  # nearest chunks asked per chunk of the new text
# Fresh vectors (not in the HNSW graph yet) the sign-bit scan picks per chunk, compared exactly for the
# CANDIDATES nearest; below EXACT_BELOW fresh vectors every one is compared (as search: retrieval/fresh_scan.py).
PICKED = 16 * CANDIDATES
EXACT_BELOW = 1000
MIN_SIMILARITY = 0.35  # cosine below which two chunks are not about the same thing
MAX_CHUNKS = 64  # chunks of one new text used as queries: a book-length upload is bounded too
# Pairs of one new text a language model is asked about, the most similar first: each is a model call
# (seconds on a local model), and the nearest candidates are the likeliest to state the same fact.
MODEL_PAIRS = 8

# The documents whose current version is one of the snapshots, with their text, and only if indexed.
_SUBJECTS = sa.text(
    "SELECT d.site_domain, d.id, s.id, i.text_hash, d.origin <> 'scrape' FROM knowledge.document_snapshots s"
    " JOIN knowledge.documents d ON d.id = s.document_id AND d.current_snapshot_id = s.id"
    " JOIN knowledge.search_index i ON i.document_id = d.id AND i.snapshot_id = s.id"
    " WHERE s.id = ANY(CAST(:ids AS uuid[])) AND NOT d.is_deleted ORDER BY d.id")
# Fenced (MATERIALIZED) so that the candidate function runs once per chunk of the new text: joined
# freely, the planner may call it once per row of the tenant's index instead.
_QUERIES = ("WITH q AS MATERIALIZED (SELECT chunk_start, chunk_end, tsv, COALESCE(embedding, fresh_embedding) AS v,"
            " embedding_model AS m FROM knowledge.text_chunks WHERE text_hash = :h ORDER BY ordinal LIMIT :n),")
_CANDIDATES = (
    " SELECT near.qs, near.qe, o.text_hash, o.chunk_start, o.chunk_end, i.document_id, {similarity}"
    " FROM near JOIN knowledge.text_chunks o ON o.text_hash = near.text_hash AND o.ordinal = near.ordinal"
    " JOIN knowledge.search_index i ON i.text_hash = near.text_hash"
    " JOIN knowledge.documents d ON d.id = i.document_id AND d.current_snapshot_id = i.snapshot_id"
    " WHERE d.site_domain = :site AND d.id <> CAST(:doc AS uuid) AND d.status = 'active' AND NOT d.is_deleted"
    "{only}")
_ANY_ORIGIN, _NOT_SCRAPED = "", " AND d.origin <> 'scrape'"
_NEAR_BY_VECTOR = sa.text(
    _QUERIES + " near AS MATERIALIZED (SELECT q.chunk_start AS qs, q.chunk_end AS qe, q.v, n.text_hash, n.ordinal"
    " FROM q CROSS JOIN LATERAL knowledge.chunk_vector_candidates(q.v, q.m, :k, NULL) n WHERE q.v IS NOT NULL)"
    + _CANDIDATES.format(similarity="1 - (COALESCE(o.embedding, o.fresh_embedding) OPERATOR(public.<=>) near.v)",
                        only=_ANY_ORIGIN))
# The same with the fresh vectors the sign-bit scan picked for each query chunk (:pq its ordinal, :ph and
# :po the picked keys), compared exactly by migration 0050's overload, instead of every fresh vector.
_NEAR_BY_PICKS = sa.text(
    "WITH q AS MATERIALIZED (SELECT ordinal AS qo, chunk_start, chunk_end, COALESCE(embedding, fresh_embedding) AS v,"
    " embedding_model AS m FROM knowledge.text_chunks WHERE text_hash = :h ORDER BY ordinal LIMIT :n),"
    " picks AS (SELECT p.qo, array_agg(p.h) AS fh, array_agg(p.o) AS fo"
    "   FROM unnest(CAST(:pq AS int[]), CAST(:ph AS text[]), CAST(:po AS int[])) AS p(qo, h, o) GROUP BY p.qo),"
    " near AS MATERIALIZED (SELECT q.chunk_start AS qs, q.chunk_end AS qe, q.v, n.text_hash, n.ordinal"
    " FROM q JOIN picks ON picks.qo = q.qo"
    " CROSS JOIN LATERAL knowledge.chunk_vector_candidates(q.v, q.m, :k, NULL, picks.fh, picks.fo) n)"
    + _CANDIDATES.format(similarity="1 - (COALESCE(o.embedding, o.fresh_embedding) OPERATOR(public.<=>) near.v)",
                         only=_ANY_ORIGIN))
# A crawled page's nearest among the site's uploads and feedback only, compared exactly (they are few).
_NEAR_NOT_SCRAPED = sa.text(
    _QUERIES + " near AS MATERIALIZED (SELECT q.chunk_start AS qs, q.chunk_end AS qe, q.v, n.text_hash, n.ordinal"
    " FROM q CROSS JOIN LATERAL (SELECT c.text_hash, c.ordinal FROM knowledge.text_chunks c"
    "   JOIN knowledge.search_index si ON si.text_hash = c.text_hash"
    "   JOIN knowledge.documents od ON od.id = si.document_id AND od.current_snapshot_id = si.snapshot_id"
    "   WHERE od.site_domain = :site AND od.origin <> 'scrape' AND NOT od.is_deleted AND c.embedding_model = q.m"
    "   ORDER BY COALESCE(c.embedding, c.fresh_embedding) OPERATOR(public.<=>) q.v LIMIT :k) n WHERE q.v IS NOT NULL)"
    + _CANDIDATES.format(similarity="1 - (COALESCE(o.embedding, o.fresh_embedding) OPERATOR(public.<=>) near.v)",
                         only=_NOT_SCRAPED))
_HAS_NOT_SCRAPED = sa.text(
    "SELECT EXISTS (SELECT 1 FROM knowledge.documents WHERE site_domain = :site AND origin <> 'scrape'"
    " AND NOT is_deleted)")
# The query chunks' vectors in pgvector's binary form (int16 dimension, int16 zero, float4s big-endian).
_QUERY_VECTORS = sa.text(
    "SELECT ordinal, public.vector_send(COALESCE(embedding, fresh_embedding)), embedding_model"
    " FROM knowledge.text_chunks WHERE text_hash = :h ORDER BY ordinal LIMIT :n")
# Byte ranges of canonical texts (each text converted to UTF-8 once).
_PASSAGES = sa.text(
    "WITH b AS MATERIALIZED (SELECT text_hash, convert_to(body, 'UTF8') AS raw FROM knowledge.canonical_texts"
    "   WHERE text_hash = ANY(CAST(:t AS text[])))"
    " SELECT r.h, r.s, r.e, substring(b.raw FROM r.s + 1 FOR r.e - r.s)"
    " FROM unnest(CAST(:h AS text[]), CAST(:s AS int[]), CAST(:e AS int[])) AS r(h, s, e) JOIN b ON b.text_hash = r.h")
_WORDS = (
    _QUERIES + " near AS MATERIALIZED (SELECT q.chunk_start AS qs, q.chunk_end AS qe, n.text_hash, n.ordinal"
    " FROM q CROSS JOIN LATERAL knowledge.chunk_word_candidates(CAST(NULLIF(replace(CAST(strip(q.tsv) AS text),"
    "   ' ', ' | '), '') AS tsquery), :k, 200, NULL) n)"
    + _CANDIDATES.format(similarity="1.0", only="{only}"))
_NEAR_BY_WORDS = sa.text(_WORDS.format(only=_ANY_ORIGIN))
_NEAR_WORDS_NOT_SCRAPED = sa.text(_WORDS.format(only=_NOT_SCRAPED))
_RECORD = sa.text(
    "INSERT INTO knowledge.document_conflicts (site_domain, entity_a_type, entity_a_id, entity_b_type,"
    " entity_b_id, conflict_type, severity, evidence_a, evidence_b, details, detected_by, detector_version,"
    " a_text_hash, a_start, a_end, b_text_hash, b_start, b_end)"
    " SELECT :site, 'document', r.a, 'document', r.b, CAST(r.t AS knowledge.conflict_type),"
    " CAST(r.sev AS knowledge.conflict_severity), r.ea, r.eb, CAST(r.det AS jsonb),"
    " CAST(r.by AS knowledge.conflict_detector), r.v, r.ah, r.as_, r.ae, r.bh, r.bs, r.be"
    " FROM json_to_recordset(CAST(:rows AS json)) AS r(a uuid, b uuid, t text, sev text, ea text, eb text,"
    " det text, by text, v text, ah text, as_ int, ae int, bh text, bs int, be int)"
    " ORDER BY r.a, r.b ON CONFLICT DO NOTHING RETURNING id, entity_a_id, entity_b_id")


def default_judge(deps: Deps, texts: int = 1) -> PairJudge:
    """The judge of one detector pass over ``texts`` new texts: the configured language model's
    (``deps.language_model``; at most ``MODEL_PAIRS`` questions a text, the rules beyond them and
    whenever the model fails), else the rules."""
    model = deps.language_model
    if model is None:
        return RulesJudge()
    return ModelJudge(model, budget=MODEL_PAIRS * max(1, texts))


def find_contradictions(deps: Deps, snapshot_ids: Sequence[str], judge: PairJudge | None = None) -> list[str]:
    """Open a conflict for each contradiction between these snapshots' texts and the tenant's others;
    the ids of the conflicts opened."""
    if not snapshot_ids:
        return []
    vectors = deps.search_index.has_vectors()
    opened: list[str] = []
    with deps.engine.begin() as conn:
        subjects = conn.execute(_SUBJECTS, {"ids": list(snapshot_ids)}).all()
        judge = judge or default_judge(deps, len(subjects))
        if vectors and subjects:
            # The graph walk's breadth: twice the candidates asked (search's 40 is for ranking a query's answer;
            # here a near miss costs a candidate, not a result), for this transaction only.
            conn.execute(sa.text("SELECT set_config('hnsw.ef_search', :ef, true)"), {"ef": str(2 * CANDIDATES)})
        others: dict[str, bool] = {}  # site -> whether it holds uploads or feedback
        for site, document_id, snapshot_id, text_hash, not_scraped in subjects:
            if not not_scraped:
                # A crawled page is compared with the site's uploads and feedback only: against every other page
                # (a first crawl's thousands) the comparison held the crawl back (issue 41). An upload or a
                # feedback, when it comes, is compared with every page.
                if site not in others:
                    others[site] = bool(conn.execute(_HAS_NOT_SCRAPED, {"site": site}).scalar())
                if not others[site]:
                    continue
            rows = _judged(conn, judge, vectors, deps.search_index.fresh_signs, site, str(document_id),
                           str(snapshot_id), text_hash, crawled=not not_scraped)
            if not rows:
                continue
            found = conn.execute(_RECORD, {"site": site, "rows": json_rows(rows)}).all()
            record_changes(conn, [Change(document_id=str(document_id), type=EventType.CONFLICT_OPENED,
                                         snapshot_id=str(snapshot_id), cause=f"conflict:{i}") for i, _a, _b in found])
            opened += [str(i) for i, _a, _b in found]
            if found:
                log.info(json.dumps({"event": "contradictions-opened", "site_domain": site,
                                     "conflict_ids": [str(i) for i, _a, _b in found]}))
    return opened


def _judged(conn: sa.Connection, judge: PairJudge, vectors: bool, signs: FreshSigns, site: str, document_id: str,
            snapshot_id: str, text_hash: str, *, crawled: bool = False) -> list[dict[str, Any]]:
    """The conflict rows for one subject: each contradiction between a passage of it and a passage of another
    document (one per pair of passages, most similar first)."""
    params = {"h": text_hash, "n": MAX_CHUNKS, "k": CANDIDATES, "site": site, "doc": document_id}
    if crawled:
        near = conn.execute(_NEAR_NOT_SCRAPED if vectors else _NEAR_WORDS_NOT_SCRAPED, params).all()
    else:
        near = _near_by_vector(conn, signs, params) if vectors else conn.execute(_NEAR_BY_WORDS, params).all()
    near = [r for r in near if r[6] is not None and float(r[6]) >= MIN_SIMILARITY]
    if not near:
        return []
    # Only the passages compared, not their whole texts: a page's ~160 pairs name ~100 chunks of ~50 texts.
    ranges = sorted({(text_hash, int(r[0]), int(r[1])) for r in near} | {(r[2], int(r[3]), int(r[4])) for r in near})
    raw: dict[tuple[str, int, int], bytes] = {(h, s, e): bytes(b) for h, s, e, b in conn.execute(_PASSAGES, {
        "t": sorted({h for h, _s, _e in ranges}), "h": [h for h, _s, _e in ranges], "s": [s for _h, s, _e in ranges],
        "e": [e for _h, _s, e in ranges]})}
    passages = {key: b.decode("utf-8", "replace") for key, b in raw.items()}
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    verdicts: dict[tuple[int, str, int], Judgement] = {}  # a text several documents share is judged once
    for q_start, q_end, other_hash, o_start, o_end, other_doc, similarity in sorted(near, key=lambda r: -float(r[6])):
        other_doc = str(other_doc)
        mine, theirs = (text_hash, int(q_start), int(q_end)), (other_hash, int(o_start), int(o_end))
        if mine not in raw or theirs not in raw:
            continue
        a_text, b_text = passages[mine], passages[theirs]
        pair = (int(q_start), other_hash, int(o_start))
        verdict = verdicts.get(pair) or verdicts.setdefault(pair, judge.judge_pair(a_text, b_text))
        if verdict.relation is not Relation.CONTRADICTION:
            continue
        judged_version = verdict.judge_version or judge.version
        a_range = _bytes(a_text, q_start, verdict.a_range, q_end)
        b_range = _bytes(b_text, o_start, verdict.b_range, o_end)
        sides = [(document_id, text_hash, a_range, raw[mine], int(q_start)),
                 (other_doc, other_hash, b_range, raw[theirs], int(o_start))]
        sides.sort(key=lambda side: side[0])  # (a, b) in a fixed order: (x, y) and (y, x) are one conflict
        (a_doc, a_hash, (a_s, a_e), a_raw, a_at), (b_doc, b_hash, (b_s, b_e), b_raw, b_at) = sides
        quote_a = a_raw[a_s - a_at:a_e - a_at].decode("utf-8", "replace")
        quote_b = b_raw[b_s - b_at:b_e - b_at].decode("utf-8", "replace")
        if (other_doc, quote_a, quote_b) in found:  # the same two sentences, met again through overlapping chunks
            continue
        found[(other_doc, quote_a, quote_b)] = {
            "a": a_doc, "b": b_doc, "t": str(ConflictType.FACTUAL_CONTRADICTION), "sev": str(verdict.severity),
            "ea": quote_a, "eb": quote_b,
            "det": json_value({"reason": verdict.reason, "subject": document_id, "snapshot_id": snapshot_id,
                               "similarity": round(float(similarity), 4), "judge": judged_version}),
            "by": str(verdict.judged_by or judge.detected_by), "v": f"contradictions/1+{judged_version}",
            "ah": a_hash, "as_": a_s, "ae": a_e, "bh": b_hash, "bs": b_s, "be": b_e}
    return list(found.values())


def _near_by_vector(conn: sa.Connection, signs: FreshSigns, params: dict[str, Any]) -> Sequence[Any]:
    """The new text's chunks' nearest chunks: among the fresh vectors, the exact nearest of those the
    sign-bit scan picked (every fresh vector compared while they are few, or without numpy)."""
    rows = [r for r in conn.execute(_QUERY_VECTORS, params) if r[1] is not None]
    if not rows:
        return []
    try:
        import numpy as np
    except ImportError:  # the Cloud Functions install no numpy: the exact scan in SQL
        return conn.execute(_NEAR_BY_VECTOR, params).all()
    models = {r[2] for r in rows}
    picks = None
    if len(models) == 1:
        queries = np.stack([np.frombuffer(bytes(r[1]), dtype=">f4", offset=4) for r in rows])
        picks = signs.nearest_each(conn, str(rows[0][2]), queries, PICKED, EXACT_BELOW)
    if picks is None:
        return conn.execute(_NEAR_BY_VECTOR, params).all()
    pq = [int(r[0]) for r, (hashes, _o) in zip(rows, picks, strict=True) for _h in hashes]
    return conn.execute(_NEAR_BY_PICKS, {**params, "pq": pq, "ph": [h for hs, _o in picks for h in hs],
                                         "po": [o for _h, os_ in picks for o in os_]}).all()


def _bytes(passage: str, base: int, chars: tuple[int, int] | None, end: int) -> tuple[int, int]:
    """A judge's character range in a passage as a byte range of the canonical text (the passage when None)."""
    if chars is None:
        return base, end
    start = base + len(passage[:chars[0]].encode("utf-8"))
    return start, start + len(passage[chars[0]:chars[1]].encode("utf-8"))


def conflicts_of_snapshot(deps: Deps, site: str, snapshot_id: str | None) -> list[dict[str, Any]]:
    """The contradictions opened when this snapshot was ingested, as ingest and feedback answers list them."""
    if snapshot_id is None:
        return []
    with deps.engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT id, conflict_type::text, severity::text, detected_by::text, detector_version, entity_a_id,"
            " entity_b_id, a_text_hash, a_start, a_end, b_text_hash, b_start, b_end, evidence_a, evidence_b,"
            " details->>'reason', status::text FROM knowledge.document_conflicts"
            " WHERE site_domain = :s AND details->>'snapshot_id' = :snap ORDER BY created_at, id"),
            {"s": site, "snap": snapshot_id}).all()
    return [conflict_dict(r) for r in rows]


def conflict_dict(r: Sequence[Any]) -> dict[str, Any]:
    return {"id": str(r[0]), "conflict_type": r[1], "severity": r[2], "detected_by": r[3], "detector_version": r[4],
            "a": {"document_id": str(r[5]), "text_hash": r[7], "start": r[8], "end": r[9], "quote": r[13]},
            "b": {"document_id": str(r[6]), "text_hash": r[10], "start": r[11], "end": r[12], "quote": r[14]},
            "reason": r[15], "status": r[16]}
