"""The default embedder: a static token-vector table distilled from the packaged all-MiniLM-L6-v2.

A chunk's vector is the mean of its word pieces' rows in a table of one 384-dimension row per
vocabulary entry, L2-normalised: no network, no attention, so embedding a chunk costs about as much
as cutting it into word pieces, and runs inside ingest's transaction. The table is made the way
Model2Vec's ``distill`` makes one (Minish Lab, MIT; the method, not its code):

1. every vocabulary entry goes through the transformer alone, as ``[SEP] piece [CLS]`` (the order
   Model2Vec found best), and its row is the mean of the three output vectors;
2. centring: the mean row is taken out of every row, the direction every row shares (which
   otherwise makes every pair of texts look alike). Model2Vec's PCA also rotates the rows onto their
   principal axes; without reducing the dimensions a rotation changes no cosine, and an SVD's axes
   may come out with other signs on another machine's linear algebra, which would make two tables of
   one name disagree: so no rotation;
3. SIF weighting: each row is scaled by ``a / (a + p)`` with ``p`` a Zipf estimate of the piece's
   frequency from its place in the vocabulary (WordPiece lists frequent pieces first), so "the" and
   "of" weigh little in a mean.

Why not the ``model2vec`` package for inference: it would be a mean of rows over the same
``tokenizers`` call, and it brings the Hugging Face hub client and three more packages into every
install. Why not a published static model (potion-base-8M and kin): no package on the index ships
one; each loads from a model hub.

Distilling runs about 31,000 three-piece sequences through the transformer once: a minute or so of
one core. The table (float16, 23 MB) is cached under the model cache directory, named by the source
model's SHA-256 and the recipe's version, so a changed model or recipe makes a new table (and, by
its name, a re-embedding) rather than mixing with the old. Nothing is downloaded at any step.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import unicodedata
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gleaner.retrieval.embedder import EmbedderUnavailable
from gleaner.retrieval.minilm import MODEL_SHA256, packaged_files

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

RECIPE = 2  # bump when the distillation changes: the model's name changes with it
MODEL_NAME = f"all-MiniLM-L6-v2-static-v{RECIPE}"
DIMENSION = 384
SIF_A = 1e-4  # Model2Vec's default SIF coefficient
DISTILL_BATCH = 512  # three-piece sequences per forward pass: no padding, so bigger batches only amortise
# Rows that never stand for text: placeholders the vocabulary reserves and the markers the tokenizer adds.
_NOT_TEXT = re.compile(r"\[(unused\d+|PAD|UNK|CLS|SEP|MASK)\]")
# Printable ASCII and tab, newline, carriage return: there the tokenizer's normaliser changes nothing
# but case and its whitespace is exactly str.split()'s, so a text's pieces are its words' pieces.
_PLAIN = re.compile(r"[\t\n\r\x20-\x7e]*")
# Beyond those, a text whose other characters the tokenizer keeps inside a word (letters, marks,
# numbers, punctuation and symbols past ASCII) or reads as a space (Unicode space separators, which
# str.split() cuts at too), and no control, format, line or paragraph separator character, is cut
# into words just as the tokenizer cuts it, and each word's pieces are the same alone as in the text
# (accents, case and CJK are per-character there). Real documentation is rarely plain ASCII (a
# pilcrow, a curly quote, a dash), and cutting such a chunk whole was most of embedding it.
_NOT_PLAIN = re.compile(r"[^\t\n\r\x20-\x7e]")
_IN_WORD: dict[str, bool] = {}  # character -> whether the tokenizer keeps it inside a word
WORD_CACHE = 200_000  # words whose pieces a process keeps (then the cache starts again)


def _cut_at_ascii_whitespace(text: str) -> bool:
    """Whether every character of ``text`` outside ``_PLAIN`` is one the tokenizer keeps inside a word."""
    for char in set(_NOT_PLAIN.findall(text)):
        inside = _IN_WORD.get(char)
        if inside is None:
            kind = unicodedata.category(char)
            # A space separator (a no-break space) the normaliser makes a space, and str.split() cuts at.
            inside = _IN_WORD[char] = char > "\x7f" and (kind == "Zs" or kind[0] not in "ZC")
        if not inside:
            return False
    return True


def default_cache_dir() -> Path:
    """GLEANER_MODEL_CACHE, else $XDG_CACHE_HOME/gleaner/models, else ~/.cache/gleaner/models."""
    value = os.environ.get("GLEANER_MODEL_CACHE", "").strip()
    if value:
        return Path(value).expanduser().absolute()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "gleaner" / "models"


class StaticEmbedder:
    """Mean of the text's word pieces' rows, L2-normalised."""

    model = MODEL_NAME
    dimension = DIMENSION
    inline = True

    def __init__(self, table: np.ndarray, tokenizer_path: Path) -> None:
        import numpy as np
        from tokenizers import Tokenizer

        # float32 in memory (47 MB): summing float16 rows converts each one first, five times the cost.
        self._table = np.asarray(table, dtype=np.float32)
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        # The mean has no window: a chunk is read whole, however long.
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self._words: dict[str, tuple[int, ...]] = {}

    def _pieces(self, text: str) -> list[int]:
        """The text's word-piece ids, as the tokenizer gives them.

        Cutting a text into pieces was most of embedding's time, and a crawl repeats its words: for a
        text cut at ASCII whitespace alone (plain ASCII, or other characters only inside words: see
        ``_NOT_PLAIN``) the pieces are those of each of its whitespace-separated words in turn (the
        pre-tokenizer cuts at whitespace first), each word's cut once per process. Any other text
        goes through the tokenizer whole (Unicode spaces, control and format characters: its
        normaliser's rules).
        One text a call, never encode_batch: its thread pool spins on a busy 2-core machine."""
        if not _PLAIN.fullmatch(text) and not _cut_at_ascii_whitespace(text):
            return list(self._tokenizer.encode(text, add_special_tokens=False).ids)
        ids: list[int] = []
        words = self._words
        for word in text.split():
            pieces = words.get(word)
            if pieces is None:
                if len(words) >= WORD_CACHE:
                    words.clear()
                pieces = words[word] = tuple(self._tokenizer.encode(word, add_special_tokens=False).ids)
            ids.extend(pieces)
        return ids

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy as np

        out: list[list[float]] = []
        for text in texts:
            ids = self._pieces(text)
            vector = self._table[ids].sum(axis=0) if ids else None
            norm = float(np.linalg.norm(vector)) if vector is not None else 0.0
            if vector is None or norm < 1e-9:
                # No piece with meaning (symbols only): a fixed unit vector, since pgvector's cosine
                # of a zero vector is undefined.
                vector, norm = np.eye(1, DIMENSION, dtype=np.float32)[0], 1.0
            out.append((vector / norm).tolist())
        return out


def distill(model_path: Path, tokenizer_path: Path, threads: int = 1) -> np.ndarray:
    """The table (vocabulary size x 384, float16) from the transformer; see the module docstring."""
    import numpy as np

    from gleaner.retrieval.minilm import OnnxMiniLM

    teacher = OnnxMiniLM(model_path, tokenizer_path, threads=threads)
    tokenizer = teacher._tokenizer
    size = tokenizer.get_vocab_size()
    text_rows = np.array([not _NOT_TEXT.fullmatch(tokenizer.id_to_token(i) or "") for i in range(size)])
    sep, cls = tokenizer.token_to_id("[SEP]"), tokenizer.token_to_id("[CLS]")
    ids = np.arange(size, dtype=np.int64)
    sequences = np.stack([np.full(size, sep), ids, np.full(size, cls)], axis=1)
    raw = np.zeros((size, DIMENSION), dtype=np.float32)
    for at in range(0, size, DISTILL_BATCH):
        batch = sequences[at:at + DISTILL_BATCH]
        raw[at:at + DISTILL_BATCH] = teacher.hidden_states(batch, np.ones_like(batch)).mean(axis=1)
    kept = raw[text_rows]
    centred = kept - kept.mean(axis=0)
    inverse_rank = 1.0 / np.arange(2, len(kept) + 2)
    frequency = inverse_rank / inverse_rank.sum()
    table = np.zeros((size, DIMENSION), dtype=np.float16)
    table[text_rows] = (centred * (SIF_A / (SIF_A + frequency))[:, None]).astype(np.float16)
    return table


@contextlib.contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """One distillation per machine at a time: a second process waits, then finds the table made."""
    with lock.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _load(path: Path, rows: int) -> np.ndarray | None:
    import numpy as np

    try:
        table = np.load(path, mmap_mode="r")
    except (OSError, ValueError):
        return None
    return table if table.shape == (rows, DIMENSION) and table.dtype == np.float16 else None


def load_static(cache_dir: Path | None = None, threads: int = 1) -> StaticEmbedder:
    """The static embedder, its table read from the cache or distilled into it first."""
    try:
        import numpy  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as exc:
        raise EmbedderUnavailable(f"the static embedder needs {exc.name}: pip install numpy tokenizers") from exc
    model_path, tokenizer_path = packaged_files()
    from tokenizers import Tokenizer

    rows = Tokenizer.from_file(str(tokenizer_path)).get_vocab_size()
    folder = cache_dir or default_cache_dir()
    path = folder / f"{MODEL_NAME}-{MODEL_SHA256[:16]}.npy"
    table = _load(path, rows)
    if table is None:
        folder.mkdir(parents=True, exist_ok=True)
        with _exclusive(folder / f"{path.name}.lock"):
            table = _load(path, rows)
            if table is None:
                log.warning("distilling %s from the packaged transformer into %s (once per machine)",
                            MODEL_NAME, path)
                made = distill(model_path, tokenizer_path, threads=threads)
                partial = path.with_suffix(f".{os.getpid()}.tmp")
                with partial.open("wb") as f:
                    import numpy as np

                    np.save(f, made)
                os.replace(partial, path)  # readers see a whole table or none
                table = _load(path, rows)
    if table is None:
        raise EmbedderUnavailable(f"{path} could not be written and read back")
    return StaticEmbedder(table, tokenizer_path)
