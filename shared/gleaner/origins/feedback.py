"""Feedback (seed 003's loop): a client's correction kept as an attributed, dated document.

A feedback is a document of its own (``origin = feedback``, ``knowledge_type = faq``,
``tags = [feedback]``) at ``/feedback/{date}/{id}``, whose text is what the client wrote; who
wrote it (the credential) and when are the document's ``created_by`` and ``created_at``, and what
it answers (``about``: a document, or a search hit's ``{text_hash, start, end}``) is kept in its
version's metadata. It lands like any page (gleaner.origins.landing), so it is searchable and
citable, and the contradiction detector compares it with the tenant's other texts at once: the
conflicts it opened are in the answer.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gleaner.app import Deps
from gleaner.errors import InvalidInput
from gleaner.origins.identity import feedback_path, feedback_url
from gleaner.origins.landing import Landed, land
from gleaner.origins.store import DocumentIdentity, OriginStore
from gleaner.serving.textcheck import text_problem
from gleaner.tenancy import scope, validate_site_domain

MAX_FEEDBACK_CHARS = 20_000  # a correction is a few sentences; a document is an upload
TITLE_CHARS = 80


@dataclass(frozen=True, slots=True)
class About:
    """What a feedback answers: a document, or a passage (a search hit's text hash and byte range)."""

    document_id: str | None = None
    text_hash: str | None = None
    start: int | None = None
    end: int | None = None

    @classmethod
    def parse(cls, value: Any) -> About | None:
        if value is None or value == "":
            return None
        if isinstance(value, str):
            try:
                return cls(document_id=str(uuid.UUID(value)))
            except ValueError:
                raise InvalidInput("about must be a document id or {\"text_hash\", \"start\", \"end\"}") from None
        bounds = [value.get(k) for k in ("start", "end")] if isinstance(value, dict) else []
        if isinstance(value, dict) and isinstance(value.get("text_hash"), str) \
                and all(isinstance(b, int) and not isinstance(b, bool) for b in bounds) \
                and 0 <= value["start"] < value["end"]:
            return cls(text_hash=value["text_hash"][:128], start=value["start"], end=value["end"])
        raise InvalidInput("about must be a document id or {\"text_hash\", \"start\", \"end\"} with 0 <= start < end")

    def to_dict(self) -> dict[str, Any]:
        if self.document_id is not None:
            return {"document_id": self.document_id}
        return {"text_hash": self.text_hash, "start": self.start, "end": self.end}


def give_feedback(deps: Deps, site: str, text: str, who: str, about: About | None = None) -> Landed:
    """Keep one feedback in ``site`` (see the module docstring). InvalidInput for empty or oversized text,
    or an ``about`` the site does not hold (another tenant's looks absent)."""
    site = validate_site_domain(site)
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("the feedback text must not be empty")
    if len(text) > MAX_FEEDBACK_CHARS:
        raise InvalidInput(f"a feedback is at most {MAX_FEEDBACK_CHARS} characters; upload a document instead")
    problem = text_problem(text)
    if problem:
        raise InvalidInput(f"the feedback text {problem}")
    store = OriginStore(deps.engine)
    with scope(site):
        if about is not None and about.document_id is not None and store.document_site(about.document_id) != site:
            raise InvalidInput(f"no document {about.document_id} in {site}")
        if about is not None and about.text_hash is not None and store.text_site(about.text_hash) != site:
            raise InvalidInput(f"no text {about.text_hash} in {site}")
        now = datetime.now(UTC)
        feedback_id = uuid.uuid4().hex[:16]
        body = " ".join(text.split()) if "\n" not in text.strip() else text.strip()
        title = body if len(body) <= TITLE_CHARS else body[:TITLE_CHARS - 1].rsplit(" ", 1)[0] + "…"
        ident = DocumentIdentity(site, feedback_url(site, feedback_id), feedback_path(feedback_id, now), "feedback",
                                 knowledge_type="faq", tags=("feedback",), title=title,
                                 source_url=None, created_by=who)
        extra = {"feedback": {"by": who, "at": now.isoformat(), "about": about.to_dict() if about else None}}
        return land(deps, ident, body + "\n", extractor="feedback", metadata=extra)
