"""Writing a first crawl's chunk rows with vectors, binary COPY against text literals, alone:
``python infra/bench/vector_write.py [--texts 106] [--rounds 5]``.

Synthetic texts (19 sections of a heading and ~110 words each), prepared (chunked, embedded with the
static model, rows made) by each path, then inserted into text_chunks on an embedded PostgreSQL in a
transaction rolled back (foreign keys off: the rows alone), alternated ABBA per round. Reports the
Python CPU seconds of preparing and of the insert's call, and the server's CPU seconds of the insert.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from retrieval_search import _deps, _owner
from retrieval_textpath import _TEXT_SQL, postgres_cpu_seconds, prepare_texts_as_text

from gleaner import tenancy
from gleaner.retrieval import index as index_module
from gleaner.retrieval.embedder import EmbedModel, default_embedder
from gleaner.retrieval.prepare import NewText, prepare_texts
from gleaner.retrieval.vectors import copy_vectors

WORDS = ("tide moon shore harbour keeper lamp wind storm river valley mill grain bread oven stone bridge engine"  # noqa: SIM905
         " steam valve piston garden seed soil water root leaf light glass lens star orbit").split()


def _text(rng: random.Random, number: int) -> NewText:
    parts, spans, at = [], [], 0
    for section in range(19):
        heading = f"# Part {section} of {number}"
        body = " ".join(rng.choice(WORDS) for _ in range(110)) + "."
        for piece, kind in ((heading, "heading"), (body, "paragraph")):
            data = piece.encode()
            spans.append([at, at + len(data), kind])
            parts.append(data)
            at += len(data) + 2
    text = b"\n\n".join(parts) + b"\n"
    return NewText(f"t{number:06d}", text, json.dumps(spans))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=106)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(7)
    texts = [_text(rng, i) for i in range(args.texts)]
    embedder = default_embedder(EmbedModel.STATIC)
    embedder.embed(["warm"])
    paths = {"binary": (prepare_texts, index_module._CHUNKS_EMBEDDED),
             "text": (prepare_texts_as_text, _TEXT_SQL)}
    out: dict[str, dict[str, float]] = {p: {"prepare_cpu_s": 0.0, "insert_cpu_s": 0.0, "postgres_cpu_s": 0.0}
                                        for p in paths}
    report: dict[str, object] = {"load_average_at_start": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp, tenancy.all_tenants():
        import pgserver

        server = pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop")
        try:
            _deps(server, "vectors", Path(tmp)).close()
            owner = _owner(server, "vectors")
            chunks = 0
            for _ in range(args.rounds):
                for name in ("binary", "text", "text", "binary"):
                    prepare, statement = paths[name]
                    c0 = time.process_time()
                    prepared = prepare(texts, embedder)
                    out[name]["prepare_cpu_s"] += time.process_time() - c0
                    parts = [t for t in prepared.texts.values() if t.chunks]
                    chunks = sum(t.chunks for t in parts)
                    payload = "[" + ",".join(t.rows_json for t in parts) + "]"
                    with owner.connect() as conn:
                        conn.execute(sa.text("BEGIN"))
                        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))  # rows alone
                        c0, p0 = time.process_time(), postgres_cpu_seconds(server.pgdata)
                        if name == "binary":
                            copy_vectors(conn, b"".join(t.vectors for t in parts))
                        conn.execute(statement, {"rows": payload, "m": embedder.model, "d": embedder.dimension})
                        out[name]["insert_cpu_s"] += time.process_time() - c0
                        out[name]["postgres_cpu_s"] += postgres_cpu_seconds(server.pgdata) - p0
                        conn.execute(sa.text("ROLLBACK"))
            owner.dispose()
        finally:
            server.cleanup()
    runs = 2 * args.rounds
    report.update({"texts": args.texts, "chunks": chunks, "rounds": args.rounds,
                   "cpu_s_per_crawl_of_these_texts": {p: {k: round(v / runs, 3) for k, v in d.items()}
                                                      for p, d in out.items()},
                   "load_average_at_end": os.getloadavg()})
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
