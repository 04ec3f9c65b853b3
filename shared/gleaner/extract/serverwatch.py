"""Imported only by the extraction forkserver (``extract/pool.py`` preloads it): the forkserver exits
when the process that started it is gone (:mod:`gleaner.extract.orphan` says why it must watch)."""

from __future__ import annotations

from gleaner.extract.orphan import exit_with_parent

exit_with_parent(deathsig=False)
