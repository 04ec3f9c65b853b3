"""How much of a section one sample may speak for: an exclusion stands for a section only on evidence.

The sample stage reads one page per path section and lets its verdict stand for the section's other
pages. An include costs nothing if wrong (scrape reads each page anyway); an exclude drops pages
unread, so one near-empty landing or index page must not drop the real pages beside it. Before an
exclusion stands for a section, up to :data:`CONFIRMATIONS` more of its pages are read, leaf pages
before index-like ones; the first that is kept shows the section's pages differ, and then each page
not read is kept (scrape reads it) while each page read keeps its own verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, TypeVar

from gleaner.decide.port import PageDecision, Verdict

# More pages read before a section's exclusion stands: a small section is then decided page by page.
CONFIRMATIONS = 3

_INDEX_NAMES = ("index.html", "index.htm", "index.php", "default.htm", "default.html")


class _Member(Protocol):
    @property
    def document_id(self) -> str: ...
    @property
    def path(self) -> str: ...


class _Sampled(Protocol):
    @property
    def document_id(self) -> str: ...


class _Outcome(Protocol):
    @property
    def sample(self) -> _Sampled | None: ...
    @property
    def verdict(self) -> PageDecision: ...


M = TypeVar("M", bound=_Member)
R = TypeVar("R", bound=_Outcome)


def index_like(path: str) -> bool:
    """A landing or index page (a directory, an index file): the pages most often near-empty by design."""
    return path.endswith("/") or path.rsplit("/", 1)[-1].lower() in _INDEX_NAMES


def confirm_exclusion(members: Sequence[M], first_id: str, sample: Callable[[list[M]], R]) -> Iterator[R]:
    """Further samples of a section whose first sample (``first_id``) was excluded, until one is kept, the
    section has no page left to read, or :data:`CONFIRMATIONS` were read. ``sample`` reads one page of the
    members it is given (trying them in order) and returns its outcome."""
    read = {first_id}
    ordered = sorted(members, key=lambda m: index_like(m.path))  # stable: discovery order within each kind
    for _ in range(CONFIRMATIONS):
        rest = [m for m in ordered if m.document_id not in read]
        if not rest:
            return
        outcome = sample(rest)
        if outcome.sample is None:  # nothing more could be read: the evidence is what was read
            return
        read.add(outcome.sample.document_id)
        yield outcome
        if outcome.verdict.decision != Verdict.EXCLUDE:
            return


def section_verdict(section: str, read: Sequence[tuple[str, PageDecision]]) -> PageDecision:
    """The verdict for a section's pages not read, from the pages read (path, verdict), first sample first."""
    path, first = read[0]
    if len(read) == 1:
        return PageDecision(first.decision, f"section {section} sampled via {path}: {first.reason}",
                            round(first.confidence * 0.9, 3), first.source, first.content_kind, first.evidence,
                            first.metadata)
    if all(v.decision == Verdict.EXCLUDE for _p, v in read):
        paths = ", ".join(p for p, _v in read)
        return PageDecision(Verdict.EXCLUDE, f"section {section}: all {len(read)} pages sampled were excluded"
                            f" ({paths}): {first.reason}", round(min(v.confidence for _p, v in read) * 0.9, 3),
                            first.source, first.content_kind, first.evidence, first.metadata)
    kept = next(p for p, v in read if v.decision != Verdict.EXCLUDE)
    return PageDecision(Verdict.INCLUDE, f"section {section}: its pages differ ({path} excluded: {first.reason};"
                        f" {kept} kept), so each page not sampled is read", 0.6, first.source, "mixed_section",
                        tuple(p for p, _v in read))
