"""The back office's pages for uploads and feedback: an upload form on a site, a feedback form on a document
and on each search hit (about that passage).

The upload form sends the file to ``POST /v1/ingest`` from the page itself (a multipart body, the
caller's session) and follows its job until the document is searchable; the feedback form is an
ordinary form (its CSRF token checked by the WSGI layer) answered by ``POST /v1/feedback``'s handler.
"""

from __future__ import annotations

import json

from gleaner.app import Deps
from gleaner.backoffice import api
from gleaner.backoffice.originsapi import post_feedback
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
