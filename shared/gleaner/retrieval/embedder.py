"""The Embedder port, and which model a process uses (GLEANER_EMBED_MODEL).

Two models, both from PyPI packages with nothing fetched at run time (docs/retrieval.md says why):

- ``static`` (the default, gleaner.retrieval.static): a token-vector table distilled once per machine
  from the packaged all-MiniLM-L6-v2; a chunk's vector is the mean of its word pieces' vectors. Cheap
  enough to run inside ingest's transaction, so a crawl's pages are searchable by meaning as they land.
- ``minilm`` (gleaner.retrieval.minilm): the transformer itself, better at wording far from the
  page's, at a tenth of a CPU-second a chunk; it embeds after a crawl, never inside it.

Each model's name and dimension are written with every vector; search compares only vectors of the
process's model, and ``gleaner index --reembed`` moves an index from one model to the other.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from gleaner.errors import GleanerError


class EmbedderUnavailable(GleanerError):
    """The model's files or packages are missing, or not the pinned ones."""


class EmbedModel(StrEnum):
    STATIC = "static"
    MINILM = "minilm"


class Embedder(Protocol):
    """Texts in, unit-length vectors out (cosine similarity is their dot product).

    ``inline``: cheap enough to embed a page's chunks inside ingest's transaction (else they wait
    for the end of the run, or `gleaner index`).
    """

    model: str
    dimension: int
    inline: bool

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def model_name(choice: EmbedModel) -> str:
    """The name recorded with each vector of that model, without loading it (gleaner info)."""
    if choice is EmbedModel.MINILM:
        from gleaner.retrieval.minilm import MODEL_NAME

        return MODEL_NAME
    from gleaner.retrieval.static import MODEL_NAME as STATIC_NAME

    return STATIC_NAME


@functools.cache
def default_embedder(choice: EmbedModel = EmbedModel.STATIC, cache_dir: Path | None = None,
                     threads: int = 1) -> Embedder:
    """The process's model, loaded on first use and shared (a test session loads it once).

    ``cache_dir``: where the static model's distilled table is kept (None: the default place);
    ``threads``: the transformer's (the static model's distillation is bounded by it too).
    """
    from gleaner.retrieval.minilm import OnnxMiniLM, packaged_files

    if choice is EmbedModel.MINILM:
        return OnnxMiniLM(*packaged_files(), threads=max(1, threads))
    from gleaner.retrieval.static import load_static

    return load_static(cache_dir, threads=max(1, threads))
