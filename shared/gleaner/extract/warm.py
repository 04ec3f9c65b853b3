"""What trafilatura builds on its first use, built once in the forkserver before it forks the workers.

Imported only by the extraction processes' forkserver (``extract/pool.py`` preloads it): every worker it
forks starts with the result instead of building its own on the first page that needs it.

trafilatura falls back to justext on pages where its own extraction finds too little. Its first fallback
in a process builds the union of justext's stoplists (``jt_stoplist_init``, ~150,000 words) and justext
lower-cases it into a set, cached by the stoplist's value; and trafilatura keeps that union as a tuple,
which does not keep its hash, so every later fallback hashes the whole tuple again only to find the
cached set (infra/bench/README.md, issue 16 session 7). Kept as a frozenset instead (the same words: justext
makes the same set of it), the hash is computed once. Both touch trafilatura's module state: where
its internals differ from what this expects, nothing is changed and extraction works as it ships.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def warm_justext_fallback() -> bool:
    """Build trafilatura's justext stoplist now, as a set that hashes once; False where it could not."""
    try:
        from justext.core import define_stoplist
        from trafilatura import external

        words = external.JT_STOPLIST or external.jt_stoplist_init()
        if not isinstance(words, tuple | frozenset) or not words:
            return False
        stoplist = frozenset(words)
        define_stoplist(stoplist)  # justext's lower-cased set, cached under the stoplist
        external.JT_STOPLIST = stoplist  # type: ignore[assignment]  # declared None, filled with a tuple
        return True
    except Exception:  # another trafilatura or justext: extraction stays as it ships
        log.debug("warming trafilatura's justext fallback failed", exc_info=True)
        return False


warm_justext_fallback()
