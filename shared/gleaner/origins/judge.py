"""Judging a pair of passages: contradiction, complement, duplicate or unrelated (pure, no I/O).

:class:`PairJudge` is the seam: anything with ``version``, ``detected_by`` and
``judge_pair(passage_a, passage_b) -> Judgement`` judges the pairs the contradiction detector
finds (gleaner.origins.contradictions). The language model of ``decide/`` plugs in there when one
is configured (gleaner.origins.modeljudge; its answer carries no ranges: the whole passages are
then the evidence); without one, :class:`RulesJudge` runs.

The rules judge compares the two passages sentence by sentence. Only prose is compared (no table
row, code line, command or heading, and at least three words). Two sentences are about the same
thing when they share enough of their content words (numbers, dates and stop words left out).
Such a pair contradicts when:

- each states a value (a number, a price, a percentage, a date) and no value of one is a value of
  the other, units agreeing (24 € against 22 €, not 24 € against 22 %);
- one denies a value the other states ("24, not 22" against "22");
- or they say the same words but one negates them ("is included" / "is not included").

Same values, or a pair that shares no sentence about the same thing, is no contradiction: the
rules judge never guesses a complement (it answers ``unrelated``); an identical pair is a
``duplicate``. Each contradiction names the two sentences as character ranges of the passages.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from gleaner.provenance.conflicts import DetectedBy, Severity


class Relation(StrEnum):
    CONTRADICTION = "contradiction"
    COMPLEMENT = "complement"
    DUPLICATE = "duplicate"
    UNRELATED = "unrelated"


@dataclass(frozen=True, slots=True)
class Judgement:
    relation: Relation
    severity: Severity = Severity.INFO
    reason: str = ""
    # Character ranges [start, end) of the evidence in passage a and passage b; None: the whole passage.
    a_range: tuple[int, int] | None = None
    b_range: tuple[int, int] | None = None
    # Which judge answered, when not the one asked (a model's judge that fell back to the rules says so).
    judged_by: DetectedBy | None = None
    judge_version: str | None = None


class PairJudge(Protocol):
    version: str
    detected_by: DetectedBy

    def judge_pair(self, passage_a: str, passage_b: str) -> Judgement:
        """How passage a relates to passage b."""
        ...


# -- the rules ----------------------------------------------------------------------------------

# A sentence ends at . ! ? or ; followed by a space or the end (so 2.5, v1.2 and example.com stay whole).
_SENTENCE = re.compile(r"(?:[^.!?;\n]|[.!?;](?=[^\s.!?;]))+(?:[.!?;]+|$)", re.MULTILINE)
_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_DATE = re.compile(
    r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"
    rf"|\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTHS})\.?,?\s+(\d{{4}})\b"
    rf"|\b({_MONTHS})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.IGNORECASE)
_CURRENCY = r"(?:[$€£¥]|usd|eur|gbp|euros?|dollars?|pounds?)"
_NUMBER = re.compile(
    rf"(?P<pre>{_CURRENCY}\s?)?(?P<num>\d+(?:[.,]\d+)*)\s?(?P<post>%|percent\b|{_CURRENCY}\b|€|\$|£)?",
    re.IGNORECASE)
_NEGATED_VALUE = re.compile(r"\b(?:not|no longer|instead of|rather than|never)\s+$", re.IGNORECASE)
_NEGATION = re.compile(r"\b(?:not|no|never|none|cannot|without|n't)\b|n't\b", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?", re.UNICODE)
_STOP_WORDS = (
    "a an the is are was were be been being am of to in on at for by with from as and or but if then than "
    "that this these those it its it's we our you your they their he she his her i me my us them there "
    "here so such do does did has have had will would shall should can could may might must not no never "
    "none cannot without also just only very more most less least about into over under per each any all "
    "some what which who whom whose when where why how yes indeed actually really now today says said say "
)
_STOP = frozenset(_STOP_WORDS.split())
_MONTH_WORDS = frozenset(_MONTHS.split("|"))
_MONTH_NUMBERS = {m: i + 1 for i, m in enumerate(_MONTHS.split("|")[:12])}
_DIGIT = re.compile(r"\d")
_CLAIM = re.compile(r"\d|\b(?:not|no|never|none|cannot|without)\b|n't\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class _Sentence:
    start: int
    end: int
    words: frozenset[str]
    values: frozenset[tuple[str, str]]  # (kind or unit, normalised value) stated
    denied: frozenset[tuple[str, str]]  # values the sentence says are not so ("24, not 22")
    negated: bool


def _unit(pre: str | None, post: str | None) -> str:
    mark = (pre or post or "").strip().lower()
    if mark in ("%", "percent"):
        return "percent"
    if mark:
        return "money"
    return "number"


def _values(sentence: str) -> tuple[set[tuple[str, str]], set[tuple[str, str]], str]:
    """(values stated, values denied, the sentence with dates and numbers blanked)."""
    stated: set[tuple[str, str]] = set()
    denied: set[tuple[str, str]] = set()
    if not _DIGIT.search(sentence):  # dates and numbers all have a digit: most prose sentences end here
        return stated, denied, sentence
    months = _MONTH_NUMBERS

    def date_of(m: re.Match[str]) -> str:
        if m.group(1):
            return f"{int(m.group(1)):04d}-{int(m.group(2)):02d}-{int(m.group(3)):02d}"
        day, month, year = (m.group(4), m.group(5), m.group(6)) if m.group(4) else (m.group(8), m.group(7), m.group(9))
        number = months.get(month.lower()) or next(i + 1 for i, name in enumerate(months) if name.startswith(
            month.lower()[:3]))
        return f"{int(year):04d}-{number:02d}-{int(day):02d}"

    blanked = sentence
    for m in list(_DATE.finditer(sentence)):
        target = denied if _NEGATED_VALUE.search(sentence[:m.start()]) else stated
        target.add(("date", date_of(m)))
        blanked = blanked[:m.start()] + " " * (m.end() - m.start()) + blanked[m.end():]
    for m in _NUMBER.finditer(blanked):
        value = m.group("num").replace(",", "")
        value = value.rstrip("0").rstrip(".") if "." in value else value
        target = denied if _NEGATED_VALUE.search(blanked[:m.start()]) else stated
        target.add((_unit(m.group("pre"), m.group("post")), value))
    return stated, denied, re.sub(r"\d", " ", blanked)


def _stem(word: str) -> str:
    """A crude English stem: enough that "includes" and "include" are one word to the judge."""
    for suffix in ("ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[:-len(suffix)]
    return word


_NOT_PROSE = re.compile(r"^\s*(?:[|`$>#]|```|~~~)|`|\s--?[a-z]|\|\s*$|[{}<>=]|://")
MIN_WORDS = 3  # a claim has a subject, a verb and what it says: fewer is a label, a cell or a command


def _is_prose(text: str) -> bool:
    """Whether a sentence reads as a claim: not a table row, a code line or a command, and a few words long.
    Headings are left out too: a title states nothing."""
    return not _NOT_PROSE.search(text) and len(_WORD.findall(text)) >= MIN_WORDS


@functools.lru_cache(maxsize=4096)  # a new chunk meets each of its candidates: each passage is read once
def sentences(passage: str) -> tuple[_Sentence, ...]:
    out = []
    for m in _SENTENCE.finditer(passage):
        text = m.group(0)
        if not text.strip() or not _is_prose(text):
            continue
        stated, denied, words_only = _values(text)
        words = frozenset(_stem(w.lower()) for w in _WORD.findall(words_only)
                          if w.lower() not in _STOP and w.lower() not in _MONTH_WORDS and len(w) > 1)
        # A denied value is not a negation of the sentence's claim ("24, not 22" asserts 24).
        negated = bool(_NEGATION.search(words_only)) and not denied
        lead = len(text) - len(text.lstrip())
        out.append(_Sentence(m.start() + lead, m.start() + len(text.rstrip()), words, frozenset(stated),
                             frozenset(denied), negated))
    return tuple(out)



@functools.lru_cache(maxsize=4096)  # as sentences(): a passage meets several others
def _normalised(passage: str) -> str:
    return " ".join(passage.split())


@functools.lru_cache(maxsize=4096)
def _has_claim(passage: str) -> bool:
    return _CLAIM.search(passage) is not None


def _about_the_same(a: _Sentence, b: _Sentence, need: float) -> bool:
    if not a.words or not b.words:
        return False
    shared = len(a.words & b.words)
    return shared >= 1 and shared / min(len(a.words), len(b.words)) >= need


def worth_judging(passage_a: str, passage_b: str, need: float = 0.5) -> bool:
    """Whether a prose sentence of one passage speaks of what one of the other says, in other words: a
    pair with something to decide (same sentences agree; sentences about other things say nothing of
    each other). The gate in front of a costly judge."""
    for sa in sentences(passage_a):
        said = " ".join(passage_a[sa.start:sa.end].split())
        for sb in sentences(passage_b):
            if _about_the_same(sa, sb, need) and said != " ".join(passage_b[sb.start:sb.end].split()):
                return True
    return False


def _same_kind(a: str, b: str) -> bool:
    """Whether two values can be the same fact: same unit, or one a bare number (dates only with dates)."""
    if "date" in (a, b):
        return a == b
    return a == b or "number" in (a, b)


def _clash(a: _Sentence, b: _Sentence) -> str | None:
    """Why two sentences about the same thing contradict, or None."""
    for mine, theirs in ((a, b), (b, a)):
        for kind, value in sorted(mine.denied):
            if any(v == value and _same_kind(kind, k) for k, v in theirs.values):
                return f"one says {value} is not so, the other states {value}"
    for kind in ("date", "money", "percent", "number"):
        ours = {v for k, v in a.values if k == kind}
        others = {v for k, v in b.values if _same_kind(kind, k)}
        if ours and others and not ours & others:
            what = {"money": "prices", "percent": "percentages", "date": "dates"}.get(kind, "numbers")
            if kind == "number":
                what = next(({"money": "prices", "percent": "percentages"}[k] for k, _v in b.values
                             if k in ("money", "percent")), what)
            return f"the {what} differ: {', '.join(sorted(ours))} against {', '.join(sorted(others))}"
    return None


class RulesJudge:
    """The deterministic judge (see the module docstring)."""

    version = "rules/1"
    detected_by = DetectedBy.RULES

    def __init__(self, same_topic: float = 0.5, same_claim: float = 0.8) -> None:
        self.same_topic = same_topic  # shared content words / the shorter sentence's, for differing values
        self.same_claim = same_claim  # the same, for a negation (the words must be nearly the same)

    def judge_pair(self, passage_a: str, passage_b: str) -> Judgement:
        if _normalised(passage_a) == _normalised(passage_b):
            return Judgement(Relation.DUPLICATE, Severity.INFO, "the same text")
        # A value or a negation on one side at least, or no rule can find anything: most pairs end here.
        if not (_has_claim(passage_a) or _has_claim(passage_b)):
            return Judgement(Relation.UNRELATED, Severity.INFO, "no value or negation to compare")
        for sa in sentences(passage_a):
            for sb in sentences(passage_b):
                # Two sentences stating no value and negating nothing cannot clash (see _clash and the
                # negation rule): skipped before their words are compared, the order of the rest kept.
                if not (sa.values or sa.denied or sa.negated or sb.values or sb.denied or sb.negated):
                    continue
                if not _about_the_same(sa, sb, self.same_topic):
                    continue
                why = _clash(sa, sb)
                if why is None and sa.negated != sb.negated and not (sa.values ^ sb.values) \
                        and _about_the_same(sa, sb, self.same_claim):
                    why = "one sentence negates what the other states"
                if why is not None:
                    severity = Severity.ERROR if "prices" in why or "dates" in why else Severity.WARN
                    return Judgement(Relation.CONTRADICTION, severity, why, (sa.start, sa.end), (sb.start, sb.end))
        return Judgement(Relation.UNRELATED, Severity.INFO, "no sentence of one contradicts the other")
