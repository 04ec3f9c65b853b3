"""SimHash: reformatted copies land within Hamming distance 3, other texts far away, and a band always matches."""

from __future__ import annotations

import random

from gleaner.provenance.conflicts import DetectedBy, DuplicateDetector, TextFingerprint
from gleaner.provenance.simhash import (
    _POSITION,
    NEAR_DISTANCE,
    SHINGLE_WORDS,
    bands,
    from_signed,
    hamming,
    simhash,
    to_signed,
    words_of,
)

PINNED_ARTICLE_FINGERPRINT = 15513339041870907160

ARTICLE = ("Gleaner keeps an auditable copy of the public pages a team relies on. It discovers URLs, fetches them "
           "politely, stores every version immutably and detects change. Quotes verify against the exact bytes "
           "they came from, so a reader can check any citation without trusting the crawler. ") * 3


def test_a_reformatted_copy_is_a_near_duplicate_and_another_text_is_not():
    reformatted = "## " + ARTICLE.upper().replace(". ", " — ").replace(",", " ;")
    other = "Completely different prose about cooking pasta, boiling water and adding salt to taste. " * 6
    assert hamming(simhash(ARTICLE), simhash(reformatted)) <= NEAR_DISTANCE
    assert hamming(simhash(ARTICLE), simhash(other)) > 10


def test_a_small_edit_moves_the_fingerprint_a_little_and_a_text_with_no_words_has_none():
    edited = ARTICLE.replace("immutably", "forever", 1)
    assert hamming(simhash(ARTICLE), simhash(edited)) < 16
    assert simhash("— … !") == 0


def _reference_simhash(text: str) -> int:
    """The definition, one shingle and one bit at a time: what the fast version must equal exactly."""
    import hashlib

    words = words_of(text)
    if not words:
        return 0
    words += [""] * (SHINGLE_WORDS - len(words))

    def word_hash(word: str) -> bytes:
        return hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest() if word else bytes(8)

    votes = [0] * 64
    shingles = len(words) - SHINGLE_WORDS + 1
    for i in range(shingles):
        first, second, third = (word_hash(w) for w in words[i:i + SHINGLE_WORDS])
        value = (int.from_bytes(first, "little") ^ int.from_bytes(second.translate(_POSITION[0]), "little")
                 ^ int.from_bytes(third.translate(_POSITION[1]), "little"))
        for bit in range(64):
            votes[bit] += value >> bit & 1
    return sum(1 << bit for bit in range(64) if 2 * votes[bit] > shingles)


def test_fingerprints_are_those_of_the_definition_for_short_long_and_repetitive_texts():
    """Stored fingerprints are compared with new ones, so the fast count must never drift from the definition,
    including past 32,768 shingles, where its per-column counters must widen."""
    rng = random.Random(11)
    vocabulary = ["gleaner", "crawl", "page", "zé", "Ωmega", "q1", "the", "a"]
    every_ascii = "".join(map(chr, range(128)))
    compatibility = "Straße \ufb01ne \uff21\uff22\uff23 one"  # NFKC folds the ligature and the full-width letters
    texts = ["one", "one two", "one two three", ARTICLE, ARTICLE * 40, every_ascii * 3, compatibility]
    texts += [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 300))) for _ in range(60)]
    texts.append(" ".join(rng.choice(vocabulary[:3]) + str(rng.randint(0, 9)) for _ in range(40_000)))
    for text in texts:
        assert simhash(text) == _reference_simhash(text), text[:60]
    # The values the first release stored: a change of the algorithm would break every comparison with them.
    assert simhash(ARTICLE) == PINNED_ARTICLE_FINGERPRINT


def test_texts_whose_other_characters_are_punctuation_or_letters_fingerprint_as_the_definition():
    """The byte split of a text whose non-ASCII characters all separate words must find the words_of words;
    a letter, a mark or a character NFKC turns into letters beside them must not be split away."""
    rng = random.Random(5)
    punctuation = ["\u2014", "\u2019", "\u201c", "\u201d", "\u00b6", "\u00a9", "\u00ab", "\u00bb", "\u2026",
                   "\u00a0", "\u2022", "\u2192"]
    wordlike = ["\u00e9", "\u00df", "\u0301", "\u093e", "\u2122", "\ufb01", "\uff21", "\u0130", "\u00b2", "\u2160"]
    words = ["gleaner", "Crawl", "page", "q1", "the", "_x", "it's"]
    for trial in range(300):
        pool = [*punctuation, *(wordlike if trial % 2 else []), " ", "", "-"]
        text = "".join(rng.choice(words) + rng.choice(pool) for _ in range(rng.randint(1, 80)))
        assert simhash(text) == _reference_simhash(text), text


def test_the_words_a_process_remembers_change_no_fingerprint_when_they_are_forgotten(monkeypatch):
    from gleaner.provenance import simhash as module

    monkeypatch.setattr(module, "_KNOWN_WORDS_LIMIT", 5)  # forgotten after every few words
    texts = [ARTICLE, ARTICLE.upper(), "Straße one two three", "one two", ARTICLE[:200]]
    assert [simhash(t) for t in texts] == [_reference_simhash(t) for t in texts]
    assert len(module._KNOWN_WORDS) <= 5 + len(set(words_of(ARTICLE[:200])))


def test_fingerprints_within_three_bits_always_share_a_band():
    rng = random.Random(7)
    for _ in range(500):
        value = rng.getrandbits(64)
        flipped = value
        for bit in rng.sample(range(64), 3):
            flipped ^= 1 << bit
        assert hamming(value, flipped) == 3
        assert any(x == y for x, y in zip(bands(value), bands(flipped), strict=True))


def test_a_fingerprint_survives_the_round_trip_through_a_signed_bigint():
    for value in (0, 1, 2**63 - 1, 2**63, 2**64 - 1):
        assert from_signed(to_signed(value)) == value
        assert -(2**63) <= to_signed(value) < 2**63


def _fingerprint(doc: str, text_hash: str, fingerprint: int, order: int) -> TextFingerprint:
    from datetime import UTC, datetime, timedelta

    return TextFingerprint(doc, f"https://h{order}.test/{doc}", text_hash, fingerprint,
                           datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=order))


def test_the_detector_names_the_earliest_exact_copy_before_any_near_one():
    near = simhash(ARTICLE) ^ 0b101
    original = _fingerprint("a", "h1", simhash(ARTICLE), 0)
    close = _fingerprint("b", "h2", near, 1)
    copy = _fingerprint("c", "h1", simhash(ARTICLE), 2)
    (finding,) = DuplicateDetector().detect(copy, [close, original])
    assert finding.other is original and finding.detected_by is DetectedBy.CONTENT_HASH
    (finding,) = DuplicateDetector().detect(close, [copy, original])
    assert finding.other is original and finding.detected_by is DetectedBy.SIMHASH
    assert finding.details["distance"] == 2 and finding.details["cross_host"] is True
    assert [f.document_id for f in finding.ordered()] == ["a", "b"]
    assert DuplicateDetector().detect(close, [_fingerprint("d", "h3", ~near & (2**64 - 1), 3)]) == []
