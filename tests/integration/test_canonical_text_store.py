"""Ingest's one statement stores each text of a message exactly, whatever characters its neighbours hold."""

from __future__ import annotations

import uuid
from typing import Any

import sqlalchemy as sa

from gleaner.provenance.canonical import canonicalise

BODIES = [
    "# Überschrift\n\nDer Text enthält Umlaute: ä, ö, ü, ß.",
    "# 見出し\n\n日本語の段落です。\n\n- 項目",
    "# Plain\n\nASCII only, after two texts with multi-byte characters.",
    "# Emoji 🙂\n\nFour-byte characters 🚀 and a quote: \" and a backslash: \\.",
]


def test_texts_with_multibyte_characters_in_one_message_are_each_stored_with_their_spans(deps: Any) -> None:
    texts = [canonicalise(body.encode("utf-8")) for body in BODIES]
    assert deps.texts.store([(str(uuid.uuid4()), text) for text in texts]) == len(texts)
    with deps.metadata.engine.connect() as conn:
        for text in texts:
            body, length = conn.execute(sa.text(
                "SELECT body, byte_length FROM knowledge.canonical_texts WHERE text_hash = :h"),
                {"h": text.text_hash}).one()
            assert body.encode("utf-8") == text.text
            assert length == len(text.text)
            spans = conn.execute(sa.text(
                "SELECT span_start, span_end, kind FROM knowledge.text_spans WHERE text_hash = :h ORDER BY ordinal"),
                {"h": text.text_hash}).all()
            assert [(s.start, s.end, s.kind) for s in text.spans()] == [tuple(row) for row in spans]
    # The same texts again are known: nothing new is stored.
    assert deps.texts.store([(str(uuid.uuid4()), text) for text in texts]) == 0
