"""The back office's pages for uploads, feedback and validation: an upload form on a site, a feedback form
on a document and on each search hit (about that passage), a comment-or-flag form on a document, and an
edit form on each composite.

The upload form sends the file to ``POST /v1/ingest`` from the page itself (a multipart body, the
caller's session) and follows its job until the document is searchable; the feedback form is an
ordinary form (its CSRF token checked by the WSGI layer) answered by ``POST /v1/feedback``'s handler;
so are the remark form (``POST /v1/documents/{doc}/remarks``) and the composite's edit form
(``POST /v1/composites/{id}/edit``), each as the signed-in credential.
"""

from __future__ import annotations

import json

from gleaner.app import Deps
from gleaner.backoffice import api, compositesapi
from gleaner.backoffice.api import HttpError
from gleaner.backoffice.originsapi import post_feedback, post_remark
from gleaner.backoffice.pages import Page, PageRequest, render


def upload_page(deps: Deps, req: PageRequest, site: str) -> Page:
    site = api.check_site(deps, site)
    return render("upload.html", site=site)


def send_feedback(deps: Deps, req: PageRequest, document_id: str) -> Page:
    doc = api.get_document(deps, api.ApiRequest("GET", "", {}, b"", req.access), document_id)["document"]
    about: object = doc["id"]
    start, end = req.form.get("start", ""), req.form.get("end", "")
    if req.form.get("text_hash") and start.isdigit() and end.isdigit():  # sent from a search hit: that passage
        about = {"text_hash": req.form["text_hash"], "start": int(start), "end": int(end)}
    body = json.dumps({"site": doc["site_domain"], "text": req.form.get("text", ""), "about": about}).encode()
    status, answer = post_feedback(deps, api.ApiRequest("POST", "", {}, body, req.access))
    if status != 201:
        return render("error.html", status, status=status, message=answer.get("error", "feedback refused"))
    opened = len(answer.get("conflicts") or [])
    return Page(303, location=f"/ui/documents/{answer['document_id']}?done="
                              + ("feedback-conflicts" if opened else "feedback-kept"))


def send_remark(deps: Deps, req: PageRequest, document_id: str) -> Page:
    kind = req.form.get("kind", "comment")
    body = json.dumps({"kind": kind, "text": req.form.get("text", "")}).encode()
    status, answer = post_remark(deps, api.ApiRequest("POST", "", {}, body, req.access), document_id)
    if status != 201:
        return render("error.html", status, status=status, message=answer.get("error", "remark refused"))
    return Page(303, location=f"/ui/documents/{document_id}?done={'flag' if kind == 'flag' else 'comment'}-kept")


def edit_composite(deps: Deps, req: PageRequest, composite_id: str) -> Page:
    """The edit form's body as the composite's next version; a refusal re-renders the list saying why."""
    from gleaner.backoffice.actions import composites_page

    access = api.ApiRequest("GET", "", {}, b"", req.access)
    site = compositesapi.get_composite(deps, access, composite_id)["composite"]["site_domain"]
    sent = {"markdown": req.form.get("markdown", ""), "note": req.form.get("note") or None}
    try:
        status, _ = compositesapi.post_edit(deps, api.ApiRequest("POST", "", {}, json.dumps(sent).encode(),
                                                                 req.access), composite_id)
    except HttpError as exc:
        if exc.status not in (400, 409):
            raise
        return composites_page(deps, req, site, refused=f"Not edited: {exc.message}")
    return Page(303, location=f"/ui/sites/{site}/composites?done="
                              + ("composite-edited" if status == 201 else "composite-unchanged"))
